"""Sorting along a dim: ``sort``, ``argsort``, ``msort``, ``median``, ``kthvalue``. One kernel
orders each row by keys packed over positions (ties keep their order, NaN sorts last); the
values are a gather. Compared with PyTorch's stable sort in the interpreter.

Run: .venv/bin/python -m pytest -q tests/test_compiler_sort.py
"""

from __future__ import annotations

import os

os.environ.setdefault("TRITON_INTERPRET", "1")

import pytest  # noqa: E402

from compiler_cases.harness import check, program  # noqa: E402
from drtriton.compiler import CompilerConfig, UnsupportedOperatorError, compile_program  # noqa: E402,I001

SORTS = """
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x, y, z):
        x = torch.round(x * 2)  # many ties: their positions' order decides the indices
        s, i = torch.sort(x, dim=1, descending=True, stable=True)
        a = torch.argsort(x, dim=0, stable=True)
        up, ui = torch.sort(z.half(), dim=-1, stable=True)
        return (s, i, a, up, ui, torch.sort(y, dim=1, stable=True).indices, torch.msort(y),
                torch.sort(z.reshape(-1), stable=True).values)


def get_inputs():
    z = torch.randn(2, 3, 13)
    z[0, 1, 4] = float("nan")
    z[1, 2, 0] = float("inf")
    return [torch.randn(37, 9), torch.randn(3, 5, 2), z]


def get_init_inputs():
    return []
"""


def test_sort_argsort_msort_with_ties_nan_and_half():
    check(SORTS)


def test_median_kthvalue_and_a_top_p_filter():
    body = """
m = a.median(dim=1)
k = torch.kthvalue(a, 3, dim=0, keepdim=True)
p = torch.softmax(b, dim=-1)
sp, si = torch.sort(p, descending=True, dim=-1)
keep = torch.cumsum(sp, dim=-1) - sp < 0.9
return m.values, m.indices, k.values, k.indices, torch.median(a), sp * keep, si
"""
    check(program(body, [(5, 8), (3, 50)]), atol=1e-6, rtol=1e-5)


INTEGER_SORTS = """
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, ids, codes, x):
        s, i = torch.sort(ids, dim=1, stable=True)  # rows of 150: three tiles of ranks, ties
        d = torch.argsort(codes, dim=0, descending=True, stable=True)
        top = x.topk(2, dim=1).indices.sort(dim=1).values  # chosen experts in order
        flags = torch.sort(ids > 4, dim=-1, stable=True).indices
        return s, i, d, flags, torch.sort(ids, dim=0).values, top


def get_inputs():
    ids = torch.randint(-3, 9, (3, 150))
    ids[0, :4] = torch.tensor([2**40, -(2**40), 2**33 + 1, 2**33])  # beyond an int32 key
    return [ids, torch.randint(0, 4, (7, 5), dtype=torch.int32), torch.randn(4, 6)]


def get_init_inputs():
    return []
"""


def test_integers_sort_exactly_with_ties_in_order():
    """Integer rows, int64 values beyond 32 bits included, are ranked by counting: values and
    indices as PyTorch's stable sort gives them (its unstable one orders ties its own way)."""
    check(INTEGER_SORTS)


def test_sorting_a_dtype_without_a_rule_is_refused_in_one_line():
    src = program("return torch.sort(a.double(), dim=1).values", [(3, 4)])
    with pytest.raises(UnsupportedOperatorError, match="sorting torch.float64") as err:
        compile_program(src, CompilerConfig(device="cpu"))
    assert err.value.line > 0
