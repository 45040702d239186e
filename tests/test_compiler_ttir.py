"""The compiler's GPU emission, compiled by Triton for an sm_90 target (no GPU needed): every dot
is at fp32 accuracy (``tf32x3`` or ``ieee``), none a plain TF32 dot. Triton's combine pass
rewrites sum(a[:, :, None] * b[None, :, :], 1) into a TF32 ``tt.dot``, whose error the judge's
precision parity rejects."""

import json
import os
import subprocess
import sys
from pathlib import Path

from drtriton.compiler import CompilerConfig, compile_program

HERE = Path(__file__).parent

PROGRAM = """
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x0, w0, w1, a, b):
        # 12 output channels per group; taps 3 apart meet at stride 3, so it runs by output phase
        t0 = F.conv_transpose1d(x0, w0, stride=3, groups=2)
        t1 = F.conv2d(t0.reshape(2, 24, 4, 7), w1)  # 4 output channels
        return t1, torch.bmm(a, b)


def get_inputs():
    return [torch.randn(2, 64, 9), torch.randn(64, 12, 4), torch.randn(4, 24, 3, 3),
            torch.randn(3, 40, 48), torch.randn(3, 48, 24)]


def get_init_inputs():
    return []
"""


def _fp32_accurate(line: str) -> bool:
    return "inputPrecision" not in line or "ieee" in line or "tf32x3" in line


def _dots(candidate: str, tmp_path: Path) -> dict[str, list[str]]:
    path = tmp_path / "candidate.py"
    path.write_text(candidate)
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    done = subprocess.run([sys.executable, str(HERE / "ttir_dots.py"), str(path)], env=env,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout)


def test_gpu_emission_has_no_tf32_dot(tmp_path):
    candidate = compile_program(PROGRAM, CompilerConfig(mode="strict", device="cuda"))
    assert "tl.sum(" in candidate and "tl.dot(" in candidate  # both paths are exercised
    found = _dots(candidate, tmp_path)
    assert any("conv_transpose1d" in k for k in found) and any("bmm" in k for k in found)
    lines = [line for per_kernel in found.values() for line in per_kernel]
    assert lines, "the bmm's tl.dot should appear"
    assert all(_fp32_accurate(line) for line in lines), found
    assert any("tf32x3" in line for line in lines), "GPU dots run on tensor cores (3xTF32)"


def test_the_check_catches_the_rewritten_broadcast_sum(tmp_path):
    """The check itself: the old narrow form becomes a TF32 dot after compilation."""
    candidate = compile_program(PROGRAM, CompilerConfig(mode="strict", device="cuda"))
    old = candidate.replace("[:, None, :] * tl.trans(", "[:, :, None] * (").replace(
        "[None, :, :], 2)", "[None, :, :], 1)"
    )
    assert old != candidate
    found = _dots(old, tmp_path)
    lines = [line for per_kernel in found.values() for line in per_kernel]
    assert not all(_fp32_accurate(line) for line in lines), found


def test_gpu_emission_of_a_transposed_convolution_whose_taps_never_meet_compiles(tmp_path):
    """The one-GEMM forms and the fill kernel compile for sm_90: a one-row input as a matrix-vector
    product (no dot at all), a narrow one-row input as tiles with a broadcast index, and a
    one-channel input whose weight index is the column index alone; dots stay fp32-accurate."""
    src = PROGRAM.replace(
        "        return t1, torch.bmm(a, b)",
        "        one_row = F.conv_transpose3d(a.reshape(1, 120, 48, 1, 1)[:, :, :1],"
        " b.reshape(-1)[:2880].reshape(120, 2, 3, 2, 2), stride=9, dilation=5)\n"
        "        narrow = F.conv_transpose2d(a[:1, :, :1].reshape(1, 40, 1, 1),"
        " b[0, :40, :6].reshape(40, 1, 2, 3), stride=4)\n"
        "        one_channel = F.conv_transpose2d(a[:, :1, :4].reshape(3, 1, 2, 2),"
        " b[0, :1, :18].reshape(1, 3, 2, 3), stride=4)\n"
        "        return torch.exp(one_row), narrow, one_channel")
    candidate = compile_program(src, CompilerConfig(mode="strict", device="cuda"))
    assert "part += " in candidate and "_fill" in candidate and "tl.broadcast_to(" in candidate
    assert "in1_ptr + rn[None, :], mask=bmask" in candidate
    found = _dots(candidate, tmp_path)
    convs = {name: lines for name, lines in found.items() if "conv_transpose" in name}
    assert any("conv_transpose3d" in name for name in convs) and any(
        "fill" in name for name in convs
    )
    assert not [
        line for name, lines in convs.items() if "conv_transpose3d" in name for line in lines
    ]
    lines = [line for per_kernel in convs.values() for line in per_kernel]
    assert all(_fp32_accurate(line) for line in lines), found
