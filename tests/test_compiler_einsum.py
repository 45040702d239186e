"""``torch.einsum`` as permutes, sums and one batched matmul; checked against PyTorch in the
interpreter."""

from __future__ import annotations

import os

os.environ.setdefault("TRITON_INTERPRET", "1")

import pytest  # noqa: E402

from compiler_cases.harness import check, program  # noqa: E402
from drtriton.compiler import CompilerConfig, UnsupportedOperatorError, compile_program  # noqa: E402

CASES = [
    ("bhqd,bhkd->bhqk", [(2, 2, 5, 16), (2, 2, 6, 16)]),  # attention scores
    ("bhqk,bhkd->bhqd", [(2, 2, 5, 6), (2, 2, 6, 16)]),
    ("ij,jk->ik", [(17, 20), (20, 18)]),
    ("bij,jk->bik", [(3, 17, 20), (20, 18)]),
    ("bi,bi->b", [(4, 20), (4, 20)]),  # a batched dot product
    ("i,j->ij", [(5,), (7,)]),  # outer product
    ("ij->ji", [(3, 5)]),
    ("ijk->ik", [(3, 4, 5)]),
    ("bn,nd->bd", [(2, 3), (3, 4)]),  # a short contraction (skinny path)
    ("ab,cb->ca", [(6, 20), (17, 20)]),  # output order other than the operands'
    ("ij,jk", [(17, 20), (20, 18)]),  # implicit output: the indices seen once, sorted
    ("ba,ca", [(4, 6), (5, 6)]),  # implicit: output "bc"
    ("ij", [(3, 5)]),  # implicit: itself
    ("ji", [(3, 5)]),  # implicit: sorted, so a transpose
]


@pytest.mark.parametrize(("equation", "shapes"), CASES)
def test_einsum_matches_pytorch(equation, shapes):
    names = ", ".join("abc"[: len(shapes)])
    src = program(f"return torch.einsum('{equation}', {names})", shapes)
    check(src, atol=1e-4, rtol=1e-4, equal_nan=False)


@pytest.mark.parametrize("equation", ["ii->i", "...ij,jk->...ik"])
def test_unsupported_einsum_forms_are_refused(equation):
    src = program(f"return torch.einsum('{equation}', a, a)" if "," in equation
                  else f"return torch.einsum('{equation}', a)", [(4, 4)])
    with pytest.raises(UnsupportedOperatorError, match="einsum"):
        compile_program(src, CompilerConfig(device="cpu"))
