"""``torch.einsum`` as permutes, sums and one batched matmul; checked against PyTorch in the
interpreter."""

from __future__ import annotations

import os

os.environ.setdefault("TRITON_INTERPRET", "1")

import pytest  # noqa: E402

from compiler_cases.harness import check, program  # noqa: E402
from drtriton.compiler.config import Unsupported  # noqa: E402
from drtriton.compiler.lowerings.layers import _explicit_einsum  # noqa: E402

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
    ("...ij,jk->...ik", [(2, 3, 17, 20), (20, 18)]),  # a linear map over any leading dims
    ("...ij,...jk", [(3, 5, 6), (3, 6, 4)]),  # implicit output: the ellipsis first
    ("b...d,b...d->b...", [(2, 3, 4, 8), (2, 1, 4, 8)]),  # broadcast inside the ellipsis
    ("...d,d->...", [(2, 3, 8), (8,)]),
    ("ii->i", [(5, 5)]),  # a repeated index: the diagonal
    ("bii->b", [(3, 4, 4)]),  # traces
    ("ij,jj->i", [(3, 4), (4, 4)]),
]


@pytest.mark.parametrize(("equation", "shapes"), CASES)
def test_einsum_matches_pytorch(equation, shapes):
    names = ", ".join("abc"[: len(shapes)])
    src = program(f"return torch.einsum('{equation}', {names})", shapes)
    check(src, atol=1e-4, rtol=1e-4, equal_nan=False)


def test_an_ellipsis_is_written_out_as_right_aligned_letters_the_equation_lacks():
    assert _explicit_einsum("...ij,jk->...ik", [4, 2]) == "ABij,jk->ABik"
    assert _explicit_einsum("...ij,...jk", [4, 3]) == "ABij,Bjk->ABik"
    assert _explicit_einsum("b...,b... -> b", [2, 3]) == "bB,bAB->b"
    with pytest.raises(Unsupported, match="'.' outside"):
        _explicit_einsum("i.j->i", [2])
    with pytest.raises(Unsupported, match="more indices"):
        _explicit_einsum("...ijk->i", [2])
