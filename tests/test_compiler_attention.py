"""Attention in strict mode is one flash-attention kernel (``kernels.attention``): the scores stay
in registers. Checked against PyTorch in the interpreter for the forms ``F.scaled_dot_product_
attention`` takes: causal, bool and float masks broadcast over heads, a given scale, unequal
query and key lengths and value widths, fully masked queries, and operands computed in place."""

from __future__ import annotations

import os

os.environ.setdefault("TRITON_INTERPRET", "1")

import pytest  # noqa: E402

from compiler_cases.harness import check  # noqa: E402
from drtriton.compiler import CompilerConfig, compile_program  # noqa: E402

FORMS = '''
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.qkv = nn.Linear(24, 72)

    def forward(self, x, k, v, keep):
        q = self.qkv(x)[..., :24].view(2, 20, 3, 8).transpose(1, 2)
        causal = F.scaled_dot_product_attention(q, q, q, is_causal=True)
        cross = F.scaled_dot_product_attention(q, k, v, attn_mask=keep)
        bias = torch.arange(13.0) * -0.1 + torch.zeros(20, 1)
        scaled = F.scaled_dot_product_attention(torch.tanh(q), k, v, attn_mask=bias, scale=0.3)
        return causal, cross, scaled


def get_inputs():
    keep = torch.rand(2, 1, 20, 13) > 0.3
    keep[:, :, 5] = False  # a query that sees no key: zeros, as torch gives
    return [torch.randn(2, 20, 24), torch.randn(2, 3, 13, 8), torch.randn(2, 3, 13, 40), keep]


def get_init_inputs():
    return []
'''


def test_attention_forms_match_pytorch_in_one_kernel_each():
    candidate = check(FORMS, "strict", atol=1e-4, rtol=1e-4)
    assert candidate.count("m_use = ") == 3  # each attention is one online-softmax kernel


def test_hybrid_keeps_the_decomposition():
    candidate = check(FORMS.replace('keep[:, :, 5] = False', 'pass'), "hybrid", atol=1e-4,
                      rtol=1e-4)
    assert "m_use = " not in candidate


@pytest.mark.parametrize("causal", [False, True])
def test_gpu_emission_tunes_query_and_key_blocks(causal):
    source = FORMS.replace("is_causal=True", f"is_causal={causal}")
    candidate = compile_program(source, CompilerConfig(mode="strict", device="cuda"))
    assert 'input_precision="tf32x3"' in candidate and '"BM": 128, "BN": 64' in candidate
    assert ("(tl.program_id(0) + 1) * BM" in candidate) == causal  # a causal block stops early
