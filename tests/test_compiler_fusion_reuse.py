"""A value an operator takes twice stays a buffer when one use is fused into its producer:
hybrid ``einsum("bqd,bkd->bqk", y, y)`` of a LayerNorm's output fused one operand's copy into
the LayerNorm kernel and launched the other copy from a buffer never written (NameError)."""

from __future__ import annotations

import os

os.environ.setdefault("TRITON_INTERPRET", "1")

import pytest  # noqa: E402

from compiler_cases.harness import check, program  # noqa: E402

TWICE = '''
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.norm = nn.LayerNorm(32)

    def forward(self, x):
        y = self.norm(x)
        return torch.einsum("bqd,bkd->bqk", y, y)


def get_inputs():
    return [torch.randn(2, 12, 32)]


def get_init_inputs():
    return []
'''


@pytest.mark.parametrize("mode", ["strict", "hybrid"])
def test_an_operand_given_twice_is_computed_once_and_kept(mode):
    check(TWICE, mode, atol=1e-4, rtol=1e-4)


def test_a_shared_tensor_read_by_two_long_chains_is_still_written():
    """g feeds two chains too long to fuse whole: the first chain's head becomes a kernel that
    reads g; the second must not then fuse into g's kernel (taking it over), or the first's
    kernel reads a buffer nothing writes (the candidate crashed with a NameError)."""
    sin_chain = "h = torch.sin(h) + 0.1\n" * 30
    cos_chain = "k = torch.cos(k) + 0.1\n" * 30
    body = f"g = a * 4\nh = g\n{sin_chain}k = g\n{cos_chain}return h, k"
    check(program(body, [(8, 5)]))


def test_a_flipped_view_returned_as_an_output_is_copied():
    """A reverse cumulative sum returns a flipped view of the cumsum's buffer: as_strided takes
    no negative strides, so the candidate copies it (it crashed in hybrid mode)."""
    src = program("return torch.cumsum(a.flip(1), 1).flip(1)", [(3, 5)])
    check(src)
    check(src, mode="hybrid")
