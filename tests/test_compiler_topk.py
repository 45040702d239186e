"""``torch.topk`` as k masked arg-reductions and ``torch.cumprod`` as a blocked scan, checked
against PyTorch in the interpreter."""

from __future__ import annotations

import os

os.environ.setdefault("TRITON_INTERPRET", "1")

import pytest  # noqa: E402

from compiler_cases.harness import check, program  # noqa: E402
from drtriton.compiler import CompilerConfig, UnsupportedOperatorError, compile_program  # noqa: E402

BODIES = [
    ("v, i = torch.topk(a, 2, dim=-1)\nreturn v * 2, i", [(5, 8)]),
    ("r = a.topk(3, dim=0, largest=False)\nreturn r.values, r.indices + 1", [(6, 4)]),
    # a mixture-of-experts router: top-2 of a softmax, renormalised, one expert's weight
    ("w, s = torch.topk(torch.softmax(a, -1), 2)\nw = w / w.sum(-1, keepdim=True)\n"
     "return (w * (s == 1).to(a.dtype)).sum(-1)", [(7, 8)]),
]


@pytest.mark.parametrize(("body", "shapes"), BODIES)
def test_topk_values_and_indices_match_pytorch(body, shapes):
    src = program(body, shapes)
    check(src, atol=1e-5, rtol=1.3e-6, equal_nan=False)


def test_a_large_k_takes_the_first_k_of_a_sort():
    check(program("r = torch.topk(a.softmax(-1), 12)\nreturn r.values, r.indices", [(3, 50)]),
          atol=1e-6, rtol=1e-5)


def test_topk_of_integers_is_refused_naming_topk():
    """PyTorch orders equal values in its own way (``topk`` of [3, 1, 3, 2, 3] takes indices
    2, 4, 0), which integers, with their ties, would show."""
    src = program("return torch.topk((a * 3).long(), 3).indices", [(3, 20)])
    with pytest.raises(UnsupportedOperatorError, match="topk of torch.int64"):
        compile_program(src, CompilerConfig(device="cpu"))


@pytest.mark.parametrize(("body", "shapes"), [
    ("return torch.cumprod(a, dim=1)", [(3, 7)]),
    ("return torch.cumprod(1.0 + 0.01 * a, dim=0) * 2", [(2500, 3)]),  # several blocks
    ("return a.cumprod(-1)", [(2, 3, 1500)]),
])
def test_cumprod_matches_pytorch(body, shapes):
    src = program(body, shapes)
    check(src, atol=1e-5, rtol=1e-4, equal_nan=False)
