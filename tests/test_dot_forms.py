"""The dot-form diagnostic's arithmetic, in the interpreter: every form computes A @ B^T, the
rounded form from operands rounded to nearest TF32, the pre-split form from a high and a low
TF32 part whose sum is the fp32 operand to within its last bits."""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

os.environ.setdefault("TRITON_INTERPRET", "1")

import pytest  # noqa: E402
import torch  # noqa: E402

from compiler_cases.harness import round_mantissa  # noqa: E402

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"
sys.path.insert(0, str(BENCHMARKS))  # its sibling gpu_timing, as when run as a script
SPEC = importlib.util.spec_from_file_location("dot_forms", BENCHMARKS / "dot_forms.py")
dot_forms = importlib.util.module_from_spec(SPEC)
SPEC.loader.exec_module(dot_forms)
TILE = (32, 32, 16, 4, 2)


def _rn(x: torch.Tensor) -> torch.Tensor:
    return round_mantissa(x, 13)


def test_the_split_is_tf32_exact_and_sums_back():
    torch.manual_seed(0)
    x = torch.randn(4096)
    hi, lo = dot_forms.split(x)
    for part in (hi, lo):
        assert not (part.view(torch.int32) & ((1 << 13) - 1)).any()  # 10 mantissa bits
    assert torch.equal(hi, _rn(x))
    assert ((hi + lo - x).abs() <= x.abs() * 2.0**-21).all()


@pytest.mark.parametrize("form", dot_forms.FORMS)
def test_every_form_computes_the_product(form):
    torch.manual_seed(1)
    a, b = torch.randn(64, 48), torch.randn(96, 48)
    got = dot_forms.product(form, a, b, TILE)
    # the interpreter multiplies in fp32 whatever the precision: only the operands differ
    want = _rn(a) @ _rn(b).T if form == "tf32_rn" else a @ b.T
    torch.testing.assert_close(got, want, atol=1e-4, rtol=1e-5)
