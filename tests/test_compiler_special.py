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

