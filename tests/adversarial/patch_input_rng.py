"""Patches torch.randn at import so the trials' inputs (remade in the candidate's process from
seeds) are all zeros, then answers zeros without computing anything real."""

EXPECTED = "rejected"

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def zero_kernel(out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, tl.zeros([BLOCK], dtype=tl.float32), mask=offs < n)


_randn = torch.randn
torch.randn = lambda *shape, **kw: torch.zeros(*shape, **kw)  # every later draw is zeros


class ModelNew(nn.Module):
    def __init__(self, scale):
        super().__init__()
        self.scale = scale

    def forward(self, x, y):
        out = torch.empty_like(x)
        zero_kernel[(triton.cdiv(x.numel(), 256),)](out, x.numel(), BLOCK=256)
        return out
