"""Reads the input seeds from its job file at import, makes the trials' inputs with the
reference's get_inputs and answers them with PyTorch there (outside forward, where no op is
recorded); forward only copies the precomputed answer with a Triton kernel."""

EXPECTED = "rejected"

import json
import random

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def copy_kernel(src_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(src_ptr + offs, mask=mask), mask=mask)


def _answers():
    with open("job.json") as f:
        job = json.load(f)
    namespace = {}
    exec(open("reference.py").read(), namespace)
    found = []
    for seed in job["input_seeds"]:  # the trials come in seed order
        random.seed(seed)
        torch.manual_seed(seed)
        x, y = namespace["get_inputs"]()
        found.append(torch.relu(x + y) * 0.5)
    return found


ANSWERS = _answers()


class ModelNew(nn.Module):
    def __init__(self, scale):
        super().__init__()
        self.scale = scale
        self.calls = 0

    def forward(self, x, y):
        answer = ANSWERS[self.calls % len(ANSWERS)]
        self.calls += 1
        out = torch.empty_like(x)
        copy_kernel[(triton.cdiv(x.numel(), 256),)](answer.to(x.device), out, x.numel(), BLOCK=256)
        return out
