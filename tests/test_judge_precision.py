"""Precision parity: candidates are held to the fp32 reference's own error against a float64
oracle, so rounding inputs to TF32 or bf16 fails while accurate reorderings pass."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
import torch

from compiler_cases.harness import round_mantissa as _round
from drtriton.judge import JudgeConfig, verify
from drtriton.judge.compare import compare_outputs
from drtriton.judge.config import PARITY_FACTOR, PARITY_FLOOR

CASES = Path(__file__).parent / "precision_cases"
REFERENCE = (CASES / "ref_matmul_k1024.py").read_text()


def _expected(path: Path) -> str:
    tree = ast.parse(path.read_text())
    return next(n.value.value for n in tree.body if isinstance(n, ast.Assign)
                and getattr(n.targets[0], "id", "") == "EXPECTED")


@pytest.mark.parametrize(
    "case", sorted(p.stem for p in CASES.glob("*.py") if p.stem != "ref_matmul_k1024")
)
def test_precision_cases(case):
    path = CASES / f"{case}.py"
    verdict = verify(REFERENCE, path.read_text(), JudgeConfig(device="cpu", seed=3))
    assert verdict.status == _expected(path), verdict.reason
    assert verdict.oracle_err is not None and verdict.reference_oracle_err > 0
    if verdict.status == "incorrect":
        assert "precision" in verdict.reason


def test_rounded_inputs_pass_the_tolerance_alone():
    """Without parity, TF32-rounded inputs are within the preset's tolerance: parity is what
    rejects them."""
    source = (CASES / "tf32_rounded_inputs.py").read_text()
    config = JudgeConfig(device="cpu", seed=3, precision_parity=False)
    verdict = verify(REFERENCE, source, config)
    assert verdict.status == "correct" and verdict.oracle_err is None


def _rel(c: torch.Tensor, o: torch.Tensor) -> float:
    return float((c.double() - o).norm() / o.norm())


@pytest.mark.parametrize("m, k, n", [(64, 64, 64), (256, 1024, 256), (128, 4096, 128)])
def test_parity_margins(m, k, n):
    """The factor leaves room on both sides: accurate reorderings stay well under it, rounded
    inputs far above it (the measurements behind PARITY_FACTOR)."""
    torch.manual_seed(0)
    a, b = torch.randn(m, k), torch.randn(k, n)
    oracle = a.double() @ b.double()
    ref = _rel(a @ b, oracle)
    split = sum(a[:, i::4] @ b[i::4] for i in range(4))
    ah, bh = _round(a, 13), _round(b, 13)
    three = ah @ bh + (ah @ _round(b - bh, 13) + _round(a - ah, 13) @ bh)
    for accurate in (split, three):
        assert _rel(accurate, oracle) < 2 * ref
    for rounded in (_round(a, 13) @ _round(b, 13), _round(a, 16) @ _round(b, 16)):
        assert _rel(rounded, oracle) > 8 * PARITY_FACTOR * ref


def test_exact_outputs_get_the_floor():
    e = torch.randn(1000)
    residual = torch.zeros(1000)  # the reference is exact (a relu, a copy)
    config = JudgeConfig(device="cpu")
    close = e * (1 + 1e-7)
    assert compare_outputs((e,), [close], config, residuals=(residual,)).ok
    far = (e.half()).float()  # fp16 rounding: inside 1e-2 tolerance, far above the floor
    cmp = compare_outputs((e,), [far], config, residuals=(residual,))
    assert not cmp.ok and "precision" in cmp.reason and cmp.oracle_err > PARITY_FLOOR


def test_an_output_out_of_tolerance_says_which_side_the_oracle_is_on():
    torch.manual_seed(0)
    oracle = torch.randn(1000, dtype=torch.float64)
    e = oracle.float()  # the reference: fp32 rounding of the oracle
    residual = (oracle - e.double()).float()
    wrong = e.clone()
    wrong[:10] += 1.0  # a candidate far off on a few elements
    cmp = compare_outputs((e,), [wrong], JudgeConfig(device="cpu"), residuals=(residual,))
    assert not cmp.ok and "max_abs_err" in cmp.reason and "float64 oracle" in cmp.reason
    assert cmp.oracle_err > 1e-2 and cmp.reference_oracle_err < 1e-6


def _truncate(x: torch.Tensor, drop: int) -> torch.Tensor:
    return (x.view(torch.int32) & ~((1 << drop) - 1)).view(torch.float32)


@pytest.mark.parametrize("m, k, n", [(256, 1024, 256), (128, 4096, 128), (64, 8192, 64)])
def test_tf32_judges_against_the_oracle_where_its_reference_is_approximate(m, k, n):
    """Against a TF32 reference (inputs rounded to TF32, as cuBLAS does), exact fp32 and a dot
    that truncates to TF32 are out of atol of the reference, yet pass under ``tf32`` (within
    the oracle's slack); bf16-rounded inputs and a few wrong elements do not."""
    torch.manual_seed(0)
    a, b = torch.randn(m, k), torch.randn(k, n)
    oracle = a.double() @ b.double()
    ref = _round(a, 13) @ _round(b, 13)
    residual = (oracle - ref.double()).float()
    wrong = a @ b
    wrong[0, :4] += 2.0

    def ok(candidate: torch.Tensor, preset: str) -> bool:
        config = JudgeConfig(device="cpu", preset=preset)
        return compare_outputs((ref,), [candidate], config, residuals=(residual,)).ok

    for tf32_like in (a @ b, _truncate(a, 13) @ _truncate(b, 13)):
        assert not ok(tf32_like, "kernelbench-v0.1")  # the same tolerance, no slack
        assert ok(tf32_like, "tf32")
    assert not ok(_round(a, 16) @ _round(b, 16), "tf32")  # bf16: fails parity
    cmp = compare_outputs((ref,), [wrong], JudgeConfig(device="cpu", preset="tf32"),
                          residuals=(residual,))
    assert not cmp.ok and "float64 oracle" in cmp.reason


def test_tf32_slack_still_rejects_a_nan_past_the_first_chunk_out_of_tolerance(monkeypatch):
    """The tolerance check stops at the first chunk out of atol of the reference; the oracle's
    slack then reads every chunk, NaN and Inf patterns included."""
    from drtriton.judge import compare

    monkeypatch.setattr(compare, "COMPARE_CHUNK", 64)
    torch.manual_seed(0)
    a, b = torch.randn(16, 1024), torch.randn(1024, 16)
    oracle = a.double() @ b.double()
    ref = _round(a, 13) @ _round(b, 13)
    residual = (oracle - ref.double()).float()
    config = JudgeConfig(device="cpu", preset="tf32")
    exact = a @ b  # out of atol of the TF32 reference in the first chunk, within the slack
    assert compare_outputs((ref,), [exact], config, residuals=(residual,)).ok
    for bad in (float("nan"), float("inf")):
        wrong = exact.clone()
        wrong[-1, -1] = bad  # the last chunk
        cmp = compare_outputs((ref,), [wrong], config, residuals=(residual,))
        assert not cmp.ok and "pattern differs" in cmp.reason, cmp.reason
