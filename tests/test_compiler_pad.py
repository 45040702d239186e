"""Padding as models write it: ``F.pad`` in each mode (constant, reflect, replicate, circular),
negative widths, several dims, the ``nn`` pad modules around a convolution, and ``F.unfold``,
compiled strict and compared with PyTorch in the Triton interpreter."""

from __future__ import annotations

import os

os.environ.setdefault("TRITON_INTERPRET", "1")

import pytest  # noqa: E402

from compiler_cases.harness import check, program  # noqa: E402


@pytest.mark.parametrize("body", [
    "return F.pad(a, (1, 2))",
    "return F.pad(a, (2, 1, 1, 3), value=-1.5) * 2",
    "return F.pad(a, (2, 2, 1, 1), mode='reflect')",
    "return F.pad(a, (1, 3, 2, 0), mode='replicate') + 1",
    "return F.pad(a, (2, 1, 0, 3), mode='circular')",
    "return F.pad(a, (-1, 2, 1, -2))",
    "return torch.relu(F.pad(a, [0, 0, 1, 1, 2, 0]))",
])
def test_functional_pad(body):
    check(program(body, [(2, 3, 5, 6)]))


@pytest.mark.parametrize("layer", [
    "nn.ReflectionPad2d(2)", "nn.ReplicationPad2d((1, 0, 2, 1))", "nn.ZeroPad2d(1)",
    "nn.ConstantPad2d((1, 1, 0, 2), 0.5)", "nn.CircularPad2d(1)",
])
def test_pad_modules_before_a_convolution(layer):
    """The style-transfer and GAN blocks' reflection padding, then a 3x3 conv without its own."""
    init = f"self.pad = {layer}\nself.conv = nn.Conv2d(3, 4, 3)"
    check(program("return torch.relu(self.conv(self.pad(a)))", [(2, 3, 7, 6)], init=init),
          atol=1e-3, rtol=1e-3)


def test_pad_of_an_integer_tensor_keeps_its_dtype():
    check(program("return F.pad(a.long(), (1, 1), value=3)", [(3, 4)]))


@pytest.mark.parametrize("call, shape", [
    ("F.unfold(a, 3)", (2, 3, 6, 5)),
    ("F.unfold(a, (2, 3), dilation=(2, 1), padding=1, stride=(1, 2))", (2, 4, 7, 8)),
    ("F.unfold(a, 2, stride=2)", (3, 6, 6)),
])
def test_unfold_as_patch_extraction(call, shape):
    """im2col as models write it: patches as columns, then a matmul over them."""
    check(program(f"cols = {call}\nreturn cols, cols.sum(1)", [shape]))
