"""Advanced indexing as model code writes it: index tensors at adjacent dims with the others
whole (DLRM's ``zz[:, li, lj]`` of ``triu_indices``, ``x[:, :, buffer]``, ``x[..., idx]``),
``index_select``, negative indices (which count from the end, as in PyTorch),
``nn.EmbeddingBag`` over equal bags (entries of ``padding_idx`` left out), and the indices
``cummax``/``cummin`` return (the latest position among ties, as PyTorch picks). Both modes,
against PyTorch."""

from __future__ import annotations

import os

os.environ.setdefault("TRITON_INTERPRET", "1")

import pytest  # noqa: E402

from compiler_cases.harness import check, program  # noqa: E402
from drtriton.compiler import CompilerConfig, UnsupportedOperatorError, compile_program  # noqa: E402,I001

INDEXING = '''
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("keep", torch.tensor([3, 0, -1]))

    def forward(self, z, idx):
        zz = torch.bmm(z, z.transpose(1, 2))
        li, lj = torch.triu_indices(4, 4, offset=1)
        pairs = zz[:, li, lj]
        cols = z[:, :, self.keep]
        picked = z.index_select(1, idx) * 2
        rows, neg = zz[:, idx][:, 0], zz[idx[:2] - 2]
        return pairs, cols, picked, rows, neg, z[..., idx[:2]]


def get_inputs():
    return [torch.randn(2, 4, 8), torch.tensor([1, 3, 0, 1])]


def get_init_inputs():
    return []
'''



BAGS = '''
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.bags = nn.ModuleList(nn.EmbeddingBag(20, 8, mode=m) for m in ("sum", "mean", "max"))
        self.weighted = nn.EmbeddingBag(20, 8, mode="sum")

    def forward(self, idx, w):
        pooled = [bag(idx) for bag in self.bags]
        return torch.cat(pooled + [self.weighted(idx, per_sample_weights=w)], dim=1)


def get_inputs():
    return [torch.randint(0, 20, (4, 5)), torch.rand(4, 5)]


def get_init_inputs():
    return []
'''



CUMULATIVE = '''
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x, mask):
        v, i = torch.cummax(x, dim=1)
        lo, j = x.cummin(0)
        run = torch.where(i > 3, 1.0, 0.0)
        pos = torch.cumsum(mask, dim=1) - 1
        ties = torch.cummax(x.round(), dim=1).indices
        return v, i, lo, j.float() * 2, run, pos, ties


def get_inputs():
    return [torch.randn(3, 12) * 2, (torch.rand(3, 12) > 0.3).long()]


def get_init_inputs():
    return []
'''


PADDED_BAGS = '''
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.bags = nn.ModuleList(nn.EmbeddingBag(12, 6, mode=m, padding_idx=p)
                                  for m, p in (("sum", 0), ("mean", 0), ("max", -1)))

    def forward(self, idx):
        return torch.cat([bag(idx) for bag in self.bags], dim=1)


def get_inputs():
    idx = torch.randint(0, 12, (5, 4))
    idx[0] = 0  # a bag of padding only: zeros
    idx[1, :3] = 11  # padding of the max bag (padding_idx -1)
    idx[2, 1:] = 0
    return [idx]


def get_init_inputs():
    return []
'''


PROGRAMS = {"index_tensors": INDEXING, "embedding_bags": BAGS, "cumulative_indices": CUMULATIVE,
            "embedding_bags_with_padding": PADDED_BAGS}


@pytest.mark.parametrize("mode", ["strict", "hybrid"])
@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_matches_pytorch(name, mode):
    check(PROGRAMS[name], mode, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("key", ["[:, [0, 2]]", "[:, [3, 0, -1]]", "[[1], 1:]", "[..., [2, 2, 4]]"])
def test_a_literal_list_index(key):
    """``x[:, [0, 2]]``: evenly stepping entries are a strided slice, others one-wide slices
    concatenated (repeats and negative entries as PyTorch reads them)."""
    check(program(f"return a{key} * 2", [(4, 6)]))


def test_counts_of_true_elements_and_any_all():
    body = """
m = (a > 0) & ~(a > 1) | (a < -1)
return m.sum(1), m.sum(), m.any(1), m.all(0), torch.any(m), (a > 5).all()
"""
    check(program(body, [(5, 4)]))


def test_a_sum_of_integers_is_exact_int64():
    check(program("return (a * 10).long().sum(1), (a * 1e6).long().sum()", [(3, 4)]))


def test_indexing_by_a_boolean_mask_is_refused_in_one_line_naming_why():
    """``x[mask]``'s size depends on the mask's values."""
    src = program("m = a > 0\ny = torch.zeros_like(a)\ny[m] = a[m] * 2\nreturn y", [(6, 4)])
    with pytest.raises(UnsupportedOperatorError, match="indexing by a boolean mask") as err:
        compile_program(src, CompilerConfig(device="cpu"))
    assert err.value.line > 0


BUCKETS = """
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x, edges, rows, queries):
        x = torch.round(x * 2) / 2  # values on the edges too: the sides differ there
        return (torch.bucketize(x, edges), torch.bucketize(x, edges, right=True),
                torch.bucketize(x, edges, out_int32=True),
                torch.searchsorted(edges, x), torch.searchsorted(edges, x, side="right"),
                torch.searchsorted(rows, queries))


def get_inputs():
    rows = torch.sort(torch.randn(3, 7), dim=1).values
    return [torch.randn(4, 6), torch.linspace(-1, 1, 5), rows, torch.randn(3, 4)]


def get_init_inputs():
    return []
"""


def test_bucketize_and_searchsorted_count_the_boundaries_below():
    check(BUCKETS)


OFFSET_BAGS = """
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    \"\"\"Sparse features as recommenders look them up: one flat index list cut into bags of
    different sizes (one empty) by offsets.\"\"\"

    def __init__(self):
        super().__init__()
        self.tables = nn.ModuleList([nn.EmbeddingBag(30, 6, mode=m) for m in ("sum", "mean")])

    def forward(self, ids, offsets, w):
        ends = torch.cat([offsets, offsets.new_tensor([ids.numel()])])
        return (self.tables[0](ids, offsets), self.tables[1](ids, offsets),
                self.tables[0](ids, offsets, per_sample_weights=w),
                F.embedding_bag(ids, self.tables[1].weight, ends, mode="mean",
                                include_last_offset=True))


def get_inputs():
    return [torch.randint(0, 30, (17,)), torch.tensor([0, 3, 3, 9, 16]), torch.rand(17)]


def get_init_inputs():
    return []
"""


def test_embedding_bags_cut_by_offsets():
    check(OFFSET_BAGS, atol=1e-5, rtol=1e-5)
