"""16-bit products: a matmul, linear layer or convolution of float16 (or bfloat16) tensors feeds
``tl.dot`` its operands in that dtype, accumulating in fp32 as cuBLAS and cuDNN do, instead of
widening them to fp32 for three TF32 products (on an H200 a bf16 GPT-2 MLP ran at 0.03x eager
that way). Checked in the interpreter in float16 (bfloat16 cannot run there)."""

from __future__ import annotations

import os

os.environ.setdefault("TRITON_INTERPRET", "1")

import re  # noqa: E402
from pathlib import Path  # noqa: E402

import pytest  # noqa: E402

from compiler_cases.harness import check  # noqa: E402
from drtriton.compiler import CompilerConfig, compile_program  # noqa: E402

HALF_MODELS = '''
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(4, 16, 3, padding=1)
        self.up = nn.Linear(16, 32)
        self.down = nn.Linear(32, 16)
        self.to(torch.{dtype})

    def forward(self, x, h):
        y = torch.relu(self.conv(x)).flatten(2).transpose(1, 2)
        return self.down(F.gelu(self.up(y), approximate="tanh")) + h @ h.transpose(1, 2)[:, :16]


def get_inputs():
    return [torch.randn(2, 4, 4, 4, dtype=torch.{dtype}),
            torch.randn(2, 16, 16, dtype=torch.{dtype})]


def get_init_inputs():
    return []
'''


def _dots(candidate: str) -> list[str]:
    return re.findall(r"tl\.dot\([^\n]*", candidate)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_half_products_go_to_tl_dot_in_their_own_dtype(dtype):
    source = HALF_MODELS.format(dtype=dtype)
    candidate = compile_program(source, CompilerConfig(mode="strict", device="cuda"))
    dots = _dots(candidate)
    assert len(dots) >= 2 and not any("input_precision" in d for d in dots), dots
    assert f".to(tl.{dtype})" in candidate


@pytest.mark.parametrize("dtype", ["bfloat16", "float32"])
def test_half_products_tune_over_long_k_steps_too(dtype):
    """16-bit products add tiles with BK = 64 to their tuned space; fp32 ones do not (three
    TF32 products per tile at BK = 64 overflow shared memory with 3-4 stages)."""
    source = (Path(__file__).resolve().parents[1] / "benchmarks" / "suites" / "half"
              / "gpt2_mlp_bf16.py").read_text()  # published sizes: compiled, not run
    source = source.replace("DTYPE = torch.bfloat16", f"DTYPE = torch.{dtype}")
    candidate = compile_program(source, CompilerConfig(mode="strict", device="cuda"))
    long_steps = re.findall(r'"BM": \d+, "BN": \d+, "BK": 64', candidate)
    assert bool(long_steps) == (dtype == "bfloat16"), long_steps


def test_float16_products_match_pytorch():
    check(HALF_MODELS.format(dtype="float16"), "strict", atol=1e-2, rtol=1e-2)


def test_float32_products_keep_fp32_accuracy():
    source = HALF_MODELS.format(dtype="float32")
    candidate = compile_program(source, CompilerConfig(mode="strict", device="cuda"))
    assert all('input_precision="tf32x3"' in d for d in _dots(candidate))


HALF_ATTENTION = '''
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self, d=32, heads=2):
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(d, 3 * d, bias=False)
        self.out = nn.Linear(d, d)
        self.half()

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(x).split(d, dim=-1)
        q, k, v = (z.view(b, t, self.heads, d // self.heads).transpose(1, 2) for z in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.out(y.transpose(1, 2).reshape(b, t, d))


def get_inputs():
    return [torch.randn(2, 16, 32, dtype=torch.float16)]


def get_init_inputs():
    return []
'''


@pytest.mark.parametrize("mode", ["strict", "hybrid"])
def test_half_attention_products_keep_one_dtype(mode):
    """The products' results are in their operands' 16-bit dtype, as torch's are: a hybrid
    candidate once multiplied fp32 attention weights by half values in torch (which refuses)."""
    candidate = check(HALF_ATTENTION, mode, atol=1e-2, rtol=1e-2)
    assert ".to(torch.float32)" not in candidate  # no product widened to fp32
