"""Programs written the way people write models convert and verify, in both modes.

Run: .venv/bin/python -m pytest -q tests/test_compiler_realworld.py   (Triton interpreter, ~5 s)
"""

from __future__ import annotations

import os

os.environ.setdefault("TRITON_INTERPRET", "1")

import pytest  # noqa: E402

from compiler_cases.extra import CASES as EXTRA  # noqa: E402
from compiler_cases.harness import check, program  # noqa: E402
from compiler_cases.realworld import CASES  # noqa: E402


@pytest.mark.parametrize("mode", ["strict", "hybrid"])
@pytest.mark.parametrize("name", sorted(CASES))
def test_realworld(name, mode):
    candidate = check(CASES[name], mode=mode)
    if mode == "strict":
        assert "torch.matmul(" not in candidate and "torch.nn.functional" not in candidate


def test_linear_bias_activation_fuse_into_one_kernel():
    # Linear + bias + GELU: the epilogue fuses into the matmul kernel (one launch in total). This
    # 5 x 19 @ 19 x 13 matmul is skinny (unrolled K); a larger one keeps tl.dot tiles.
    candidate = check(CASES["linear_gelu"])
    assert candidate.count("@triton.jit") == 1
    assert "tl.math.erf" in candidate
    big = CASES["linear_gelu"].replace("torch.randn(5, 19)", "torch.randn(20, 40)").replace(
        "[19, 13]", "[40, 24]")
    candidate = check(big)
    assert candidate.count("@triton.jit") == 1
    assert "tl.dot(" in candidate and "tl.math.erf" in candidate


def test_constructor_matches_reference_parameters():
    candidate = check(CASES["residual_layernorm"])
    assert "self.proj = torch.nn.Linear(d, d)" in candidate
    assert "self.norm = torch.nn.LayerNorm(d)" in candidate


@pytest.mark.parametrize("name", sorted(EXTRA))
def test_extra_forms_strict(name):
    body, shapes = EXTRA[name]
    check(program(body, shapes))
