"""Convolutions whose groups each read one input channel (depthwise, channel multipliers, a
one-channel input) run as a direct window sum (``kernels.conv_depthwise``), with what models
put around them fused, compiled strict and compared with PyTorch in the Triton interpreter."""

from __future__ import annotations

import os

os.environ.setdefault("TRITON_INTERPRET", "1")

import pytest  # noqa: E402

from compiler_cases.harness import check, program  # noqa: E402

CASES = [
    ("self.m = nn.Conv2d(8, 8, 3, padding=1, groups=8)", "return self.m(a)", (2, 8, 9, 7)),
    ("self.m = nn.Conv2d(4, 12, 3, stride=2, padding=1, groups=4, bias=False)",
     "return self.m(a)", (2, 4, 11, 10)),
    ("self.m = nn.Conv2d(6, 6, 5, padding=4, dilation=2, groups=6)\n"
     "self.bn = nn.BatchNorm2d(6)", "return F.relu6(self.bn(self.m(a)))", (2, 6, 8, 8)),
    ("self.m = nn.Conv2d(1, 5, 3)", "return self.m(a)", (3, 1, 10, 10)),
    ("self.m = nn.Conv1d(6, 6, 7, padding=3, groups=6)", "return self.m(a)", (2, 6, 30)),
    ("self.m = nn.Conv3d(3, 3, 3, padding=1, groups=3)", "return self.m(a)", (1, 3, 5, 6, 7)),
    ("self.m = nn.Conv2d(8, 8, (1, 7), padding=(0, 3), groups=8)",
     "return self.m(F.gelu(a)) + a", (2, 8, 6, 9)),
]


@pytest.mark.parametrize("init,body,shape", CASES)
def test_depthwise_convolution_matches_pytorch(init: str, body: str, shape: tuple[int, ...]):
    candidate = check(program(body, [shape], init=init))
    assert "for kk in range(" in candidate and "tl.dot" not in candidate  # the direct kernel
