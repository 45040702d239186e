"""Advanced indexing as model code writes it: index tensors at adjacent dims with the others
whole (DLRM's ``zz[:, li, lj]`` of ``triu_indices``, ``x[:, :, buffer]``, ``x[..., idx]``),
``index_select``, negative indices (which count from the end, as in PyTorch), and
``nn.EmbeddingBag`` over equal bags, and the indices ``cummax``/``cummin`` return (the latest
position among ties, as PyTorch picks). Both modes, against PyTorch."""

from __future__ import annotations

import os

os.environ.setdefault("TRITON_INTERPRET", "1")

import pytest  # noqa: E402

from compiler_cases.harness import check  # noqa: E402

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


PROGRAMS = {"index_tensors": INDEXING, "embedding_bags": BAGS, "cumulative_indices": CUMULATIVE}


@pytest.mark.parametrize("mode", ["strict", "hybrid"])
@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_matches_pytorch(name, mode):
    check(PROGRAMS[name], mode, atol=1e-5, rtol=1e-5)
