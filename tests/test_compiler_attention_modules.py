"""``nn.MultiheadAttention`` and ``nn.TransformerEncoderLayer``, traced through to their
functional core and lowered as its decomposition; checked against PyTorch in the interpreter."""

from __future__ import annotations

import os

os.environ.setdefault("TRITON_INTERPRET", "1")

import pytest  # noqa: E402

from compiler_cases.harness import check, program  # noqa: E402
from drtriton.compiler import CompilerConfig, compile_program  # noqa: E402

MASK = "torch.ones(5, 5).triu(1) == 1"  # a bool causal mask: True is not attended
CASES = {
    "self_attention_batch_first": (
        "return self.m(a, a, a, need_weights=False)[0]",
        [(2, 5, 16)],
        "self.m = nn.MultiheadAttention(16, 2, batch_first=True)",
    ),
    "cross_attention_sequence_first_with_a_bool_mask": (
        f"return self.m(a, b, b, attn_mask={MASK}, need_weights=False)[0]",
        [(5, 2, 16), (5, 2, 16)],
        "self.m = nn.MultiheadAttention(16, 4)",
    ),
    "different_key_value_sizes": (
        "return self.m(a, b, c, need_weights=False)[0]",
        [(2, 3, 8), (2, 4, 6), (2, 4, 10)],
        "self.m = nn.MultiheadAttention(8, 2, kdim=6, vdim=10, batch_first=True)",
    ),
    "encoder_layer": (
        "return self.m(a)",
        [(2, 5, 16)],
        "self.m = nn.TransformerEncoderLayer(16, 2, 32, dropout=0.0, batch_first=True)",
    ),
    "pre_norm_encoder_layer_with_gelu": (
        "return self.m(a)",
        [(2, 5, 16)],
        "self.m = nn.TransformerEncoderLayer(16, 4, 24, dropout=0.0, batch_first=True, "
        "norm_first=True, activation='gelu')",
    ),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_attention_modules_match_pytorch(name):
    body, shapes, init = CASES[name]
    src = program(body, shapes, init=init)
    check(src, atol=1e-5, rtol=1e-4, equal_nan=False)


@pytest.mark.parametrize("average", [True, False])
def test_attention_weights_used_match_pytorch(average):
    src = program(f"return self.m(a, a, a, average_attn_weights={average})[1] * 2",
                  [(2, 5, 16)], init="self.m = nn.MultiheadAttention(16, 2, batch_first=True)")
    check(src, atol=1e-5, rtol=1e-4)


def test_attention_weights_left_unused_cost_no_kernel():
    def kernels(call: str) -> int:
        src = program(f"return {call}[0]", [(2, 5, 16)],
                      init="self.m = nn.MultiheadAttention(16, 2, batch_first=True)")
        return compile_program(src, CompilerConfig(device="cpu")).count("@triton.jit")
    assert kernels("self.m(a, a, a)") == kernels("self.m(a, a, a, need_weights=False)")
