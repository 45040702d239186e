"""float16 programs: the operators Triton computes in fp32 only (exp, erf, sqrt, sigmoid, ...)
take half arguments widened to fp32 and round their result to half, as PyTorch does. Checked in
the interpreter at the judge's float16 tolerance (bfloat16 cannot run there)."""

from __future__ import annotations

import os
from pathlib import Path

os.environ.setdefault("TRITON_INTERPRET", "1")

import pytest  # noqa: E402

from compiler_cases.harness import check  # noqa: E402
from drtriton.bench.suites import load_suite, program_source  # noqa: E402

HALF_BLOCK = '''
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.bn = nn.BatchNorm2d(8)
        self.q = nn.Linear(8, 8)
        self.fc = nn.Linear(8, 8)
        self.ln = nn.LayerNorm(8)
        self.half()

    def forward(self, x):
        y = F.silu(self.bn(self.conv(x)))
        t = y.flatten(2).transpose(1, 2)
        att = torch.softmax(self.q(t) @ t.transpose(1, 2) / 8 ** 0.5, dim=-1)
        z = self.ln(F.gelu(self.fc(att @ t)))
        return (torch.tanh(z).sum(dim=1) + torch.sigmoid(t).mean(dim=1)
                + torch.exp(-t.abs()).amax(dim=1) + torch.rsqrt(t * t + 1).sum(dim=1))


def get_inputs():
    return [torch.randn(2, 3, 4, 4, dtype=torch.float16)]


def get_init_inputs():
    return []
'''


@pytest.mark.parametrize("mode", ["strict", "hybrid"])
def test_a_float16_block_matches_pytorch(mode):
    candidate = check(HALF_BLOCK, mode, atol=1e-2, rtol=1e-2)
    assert ".to(tl.float32)" in candidate  # the half arguments of fp32-only operators


RESHAPED = '''
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def forward(self, x):
        y = F.gelu(x).reshape(2, 12).transpose(0, 1) * 0.5
        return torch.exp(y.reshape(4, 6)) + torch.sigmoid(x.reshape(6, 4).t())


def get_inputs():
    return [torch.randn(4, 6, dtype=torch.float16)]


def get_init_inputs():
    return []
'''


@pytest.mark.parametrize("mode", ["strict", "hybrid"])
def test_half_values_behind_views_are_widened_too(mode):
    check(RESHAPED, mode, atol=1e-2, rtol=1e-2)


HALF_SUITE = Path(__file__).resolve().parents[1] / "benchmarks" / "suites" / "half"


@pytest.mark.parametrize("mode", ["strict", "hybrid"])
@pytest.mark.parametrize("program", load_suite(HALF_SUITE), ids=lambda p: p.name)
def test_the_half_suite_converts_and_matches_at_cpu_size(program, mode):
    """The GPU plan `half.toml`'s programs at CPU size (bfloat16 ones run as float16 here)."""
    source = program_source(HALF_SUITE, program, "cpu")
    assert "DTYPE = torch.float16" in source
    check(source, mode, atol=1e-2, rtol=1e-2)


def test_a_hybrid_half_linear_adds_its_bias_in_the_vendor_call():
    """Rounded once, as eager's linear is: a bias added to the rounded product differs by an
    ulp, which the LayerNorm after it carried past 1e-2 in bfloat16 on a GPU."""
    program = next(p for p in load_suite(HALF_SUITE) if p.name == "bert_output_layernorm_bf16")
    candidate = check(program_source(HALF_SUITE, program, "cpu"), "hybrid", atol=1e-2,
                      rtol=1e-2)
    assert "torch.nn.functional.linear(hidden_states, p_dense_weight, p_dense_bias)" in candidate


def test_a_bfloat16_program_is_refused_for_the_interpreter_in_one_line():
    """The interpreter computes bfloat16 arithmetic wrongly (``x + x`` gave values near 1e37,
    judged incorrect): the compiler refuses it for the CPU and names the GPU."""
    from drtriton.compiler import CompilerConfig, UnsupportedOperatorError, compile_program

    source = """
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return x + x


def get_inputs():
    return [torch.randn(4, 8, dtype=torch.bfloat16)]


def get_init_inputs():
    return []
"""
    with pytest.raises(UnsupportedOperatorError, match="cannot run bfloat16") as refused:
        compile_program(source, CompilerConfig(device="cpu"))
    assert "\n" not in str(refused.value)
    assert "class ModelNew" in compile_program(source, CompilerConfig(device="cuda"))
