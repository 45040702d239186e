"""Special functions without a Triton builtin (``erfinv``, ``lgamma``, ``digamma``), evaluated
in float64 in the kernel: against PyTorch in the interpreter, and no further from a float64
evaluation than PyTorch's own float32 result is (the judge's precision parity).

Run: .venv/bin/python -m pytest -q tests/test_compiler_special.py
"""

from __future__ import annotations

import os

os.environ.setdefault("TRITON_INTERPRET", "1")

import torch  # noqa: E402

from compiler_cases.harness import check, run_pair  # noqa: E402
from drtriton.compiler import CompilerConfig, compile_program  # noqa: E402

SPECIAL = """
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        p = torch.sigmoid(x * 3) * 0.9998 + 0.0001
        g = x * 4  # negative values, poles' neighbourhoods and large ones
        return (torch.erfinv(2 * p - 1), torch.lgamma(g), torch.digamma(g),
                torch.special.gammaln(g.abs() + 30), g.digamma(), torch.erfinv(x.clamp(-1, 1)))


def get_inputs():
    return [torch.randn(64, 50)]


def get_init_inputs():
    return []
"""


def test_special_functions_match_pytorch():
    check(SPECIAL, atol=1e-4, rtol=1e-4)


def test_special_functions_are_as_accurate_as_pytorchs_float32():
    candidate = compile_program(SPECIAL, CompilerConfig(device="cpu"))
    want, got = run_pair(SPECIAL, candidate)
    namespace: dict = {}
    exec(SPECIAL, namespace)
    torch.manual_seed(1)  # the inputs run_pair drew
    (x,) = namespace["get_inputs"]()
    oracle = namespace["Model"]().double()(x.double())
    for w, g, t in zip(want, got, oracle, strict=True):
        finite = torch.isfinite(t)
        ours = (g.double() - t).abs()[finite].max()
        theirs = (w.double() - t).abs()[finite].max()
        assert ours <= 2 * theirs + 1e-6, (ours, theirs)
        assert torch.equal(torch.isfinite(g), torch.isfinite(w))



TRIGONOMETRY = """
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x, y, u):
        log_cosh = torch.log(torch.cosh(x - y)).mean()  # the log-cosh loss
        return (log_cosh, torch.sinh(x), torch.sinh(x * 1e-4), torch.asinh(x * 50),
                torch.acosh(1 + u * 3), torch.atanh(u * 1.8 - 0.9), torch.atan(x * 3),
                torch.atan2(y, x), x.arctan2(u), torch.asin(u * 2 - 1), torch.acos(u * 2 - 1),
                torch.special.erfc(x), torch.copysign(u, y), torch.fmax(x, y), x.fmin(y))


def get_inputs():
    x, y = torch.randn(6, 40), torch.randn(6, 40)
    x[0, :8] = torch.tensor([0.0, float("inf"), -float("inf"), float("nan"), -0.0, -0.0, 0.0, -2])
    y[0, :8] = torch.tensor([1.0, 2.0, -3.0, 1.0, 0.0, -0.0, -0.0, float("nan")])
    return [x, y, torch.rand(6, 40)]


def get_init_inputs():
    return []
"""


def test_hyperbolic_and_inverse_trigonometric_functions_with_their_edges():
    """Values (signed zeros of atan2 and copysign, infinities, NaN) as PyTorch's, and within
    float32 rounding of them: evaluated in float64 (atan by Cephes' polynomial and Newton)."""
    check(TRIGONOMETRY, atol=2e-7, rtol=1e-6)


def test_a_refused_special_function_is_named_as_the_program_spells_it():
    """``torch.special.i0`` (its function's ``__name__`` is ``special_i0``)."""
    import pytest

    from compiler_cases.harness import program
    from drtriton.compiler import UnsupportedOperatorError

    with pytest.raises(UnsupportedOperatorError) as err:
        compile_program(program("return torch.special.i0(a)", [(4, 8)]),
                        CompilerConfig(device="cpu", capture="fx"))
    assert err.value.operator == "torch.special.i0"
