"""``nn.MultiheadAttention`` and ``nn.TransformerEncoderLayer``, traced through to their
functional core and lowered as its decomposition; checked against PyTorch in the interpreter."""

from __future__ import annotations

import os

os.environ.setdefault("TRITON_INTERPRET", "1")

import pytest  # noqa: E402

from compiler_cases.harness import HEAD, check, program  # noqa: E402
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


def _encoder_program(forward: str, init: str, pad_rows: str) -> str:
    """A model in eval mode whose ``forward(src, pad)`` runs ``forward``; ``pad_rows`` builds the
    [2, 4] bool padding mask ``m`` (True: padded) in ``get_inputs``."""
    return (HEAD + "class Model(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
            f"        {init}\n        self.eval()\n\n    def forward(self, src, pad):\n"
            f"        {forward}\n\n\ndef get_inputs():\n"
            "    m = torch.zeros(2, 4, dtype=torch.bool)\n"
            f"    {pad_rows}\n    return [torch.randn(2, 4, 8), m]\n\n\n"
            "def get_init_inputs():\n    return []\n")


ENCODER = ("layer = nn.TransformerEncoderLayer(8, 2, 16, batch_first=True)\n"
           "        self.enc = nn.TransformerEncoder(layer, 2, norm=nn.LayerNorm(8))")


@pytest.mark.parametrize("pad_rows, mask", [
    ("m[1, 2:] = True", "pad"),                    # left-aligned: eager's nested-tensor path
    ("m[1, 2:] = True", "pad.float() * -1e4"),     # a float mask: padded where it is not 0
    ("m[1, 1] = True", "pad"),                     # a hole: not left-aligned, the plain path
])
def test_encoder_with_padding_takes_eager_pytorchs_nested_tensor_path(pad_rows, mask):
    """Without gradients, eager ``TransformerEncoder`` runs a left-aligned padded batch as nested
    tensors: its layers' output is 0 at padded positions before the final norm. Export skips
    that data-dependent check, so the capture follows eager's choice itself."""
    src = _encoder_program(f"return self.enc(src, src_key_padding_mask={mask})", ENCODER,
                           pad_rows)
    check(src, atol=1e-5, rtol=1e-4, equal_nan=False)


def test_full_transformer_with_a_causal_target_mask_and_source_padding():
    """``nn.Transformer``: the causal mask's check (a hint) guarded on its values in export."""
    init = ("self.t = nn.Transformer(8, 2, 1, 1, 16, dropout=0.0, batch_first=True)\n"
            "        self.register_buffer('causal', "
            "nn.Transformer.generate_square_subsequent_mask(4))")
    src = _encoder_program("return self.t(src, src * 2, tgt_mask=self.causal, "
                           "src_key_padding_mask=pad)", init, "m[0, 3:] = True")
    check(src, atol=1e-5, rtol=1e-4, equal_nan=False)
