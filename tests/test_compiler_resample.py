"""Resampling and rearranging ops: F.interpolate / nn.Upsample, pixel (un)shuffle, torch.roll.

Each case compiles a small program strictly (every op in Triton), runs it under the Triton
interpreter and compares it with PyTorch. Run: .venv/bin/python -m pytest -q
tests/test_compiler_resample.py
"""

from __future__ import annotations

import os
import re

os.environ.setdefault("TRITON_INTERPRET", "1")

import pytest  # noqa: E402
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

from compiler_cases.harness import check, program  # noqa: E402
from drtriton.compiler import CompilerConfig, UnsupportedOperatorError, compile_program  # noqa: E402
from drtriton.compiler.lowerings.resample import plan_axis  # noqa: E402

X4 = (2, 3, 4, 5)


def interp(args: str, shape: tuple[int, ...] = X4) -> str:
    return program(f"return F.interpolate(a, {args})", [shape])


def kernels_in(candidate: str) -> int:
    """Kernels the candidate defines (helpers such as ``_tanh`` are jitted too: not counted)."""
    return len(re.findall(r"^def k\d+_", candidate, flags=re.M))


# ---------------------------------------------------------------- nearest


def test_nearest_integer_scale_is_a_view_fused_into_its_consumer():
    # x2 repeats every element: a broadcast-and-merge view, so the add reads through it and
    # the program is one kernel with no gather formula
    src = program("return F.interpolate(a, scale_factor=2, mode='nearest') + b",
                  [X4, (2, 3, 8, 10)])
    candidate = check(src)
    assert kernels_in(candidate) == 1
    assert "tl.floor" not in candidate


@pytest.mark.parametrize("args, shape", [
    ("scale_factor=1.5, mode='nearest'", X4),
    ("scale_factor=(2.5, 0.6), mode='nearest'", X4),
    ("scale_factor=1.7", (2, 3, 6)),
    ("scale_factor=(1.7, 2.0, 0.7), mode='nearest'", (1, 2, 3, 4, 5)),
    ("scale_factor=2.7, recompute_scale_factor=True", X4),
])
def test_nearest_non_integer_scale_factor(args, shape):
    candidate = check(interp(args, shape))
    assert "tl.floor" in candidate  # a real gather, not a view


@pytest.mark.parametrize("size", [(7, 3), (8, 10), (2, 2), (12, 5), 6])
def test_nearest_explicit_size_up_and_down(size):
    check(interp(f"size={size!r}, mode='nearest'"))


def test_nearest_size_from_another_tensors_shape():
    src = program("return F.interpolate(a, size=b.shape[-2:], mode='nearest') + b",
                  [(2, 3, 4, 5), (2, 3, 7, 11)])
    assert kernels_in(check(src)) == 1


def test_nearest_exact():
    check(interp("scale_factor=1.6, mode='nearest-exact'"))
    check(interp("size=(3, 9), mode='nearest-exact'"))


@pytest.mark.parametrize("n_in", [1, 2, 3, 5, 7, 13])
def test_index_plans_match_pytorchs_own_nearest_indices(n_in):
    # the compile-time emulation of PyTorch's float32 index rule, against the indices PyTorch
    # itself picks from an arange (1-D and 2-D kernels, sizes and scale factors)
    x = torch.arange(n_in, dtype=torch.float32)
    for mode in ("nearest", "nearest-exact"):
        for kw in [dict(size=o) for o in range(1, 20)] + \
                  [dict(scale_factor=s) for s in (0.4, 0.75, 1.5, 2.5, 3.0, 3.3, 4.0)]:
            if "scale_factor" in kw and int(n_in * kw["scale_factor"]) in (0, n_in, 2 * n_in):
                continue  # sizes whose short-cuts the lowering refuses (tested below)
            want = F.interpolate(x.view(1, 1, n_in), mode=mode, **kw)[0, 0].long().tolist()
            want2 = F.interpolate(x.view(1, 1, n_in, 1), mode=mode,
                                  **{k: (v, 1) for k, v in kw.items()})[0, 0, :, 0].long()
            scale = kw.get("scale_factor")
            axis = plan_axis(mode, False, n_in, len(want), scale)
            assert list(axis.src) == want == want2.tolist(), (mode, kw)


# ---------------------------------------------------------------- linear modes


@pytest.mark.parametrize("align", [False, True])
@pytest.mark.parametrize("args", ["scale_factor=2", "scale_factor=1.7", "size=(7, 3)",
                                  "size=(3, 11)", "scale_factor=(0.5, 2.5)"])
def test_bilinear(args, align):
    candidate = check(interp(f"{args}, mode='bilinear', align_corners={align}"))
    assert "torch.nn.functional" not in candidate


@pytest.mark.parametrize("align", [False, True])
def test_linear_1d_and_trilinear_3d(align):
    check(interp(f"scale_factor=2.5, mode='linear', align_corners={align}", (2, 3, 6)))
    check(interp(f"size=(3, 5, 2), mode='trilinear', align_corners={align}", (1, 2, 2, 4, 3)))


@pytest.mark.parametrize("align", [False, True])
@pytest.mark.parametrize("args", ["scale_factor=2", "scale_factor=1.7", "size=(9, 11)",
                                  "size=(2, 3)", "scale_factor=(0.5, 2.5)", "size=(1, 4)"])
def test_bicubic(args, align):
    """Four taps per dim with Keys' cubic weights (a = -0.75), the coordinate unclamped and the
    taps clamped to the input, as PyTorch computes it."""
    candidate = check(interp(f"{args}, mode='bicubic', align_corners={align}"),
                      atol=1e-5, rtol=1e-5)
    assert "torch.nn.functional" not in candidate


def test_bilinear_from_one_pixel_is_a_broadcast():
    # DeepLab's image-pooling branch: 1 x 1 to the feature size; both neighbours are the one
    # pixel, so no kernel of its own (the add reads a broadcast view)
    src = program("return F.interpolate(a, size=b.shape[-2:], mode='bilinear', "
                  "align_corners=False) + b", [(2, 3, 1, 1), (2, 3, 5, 5)])
    candidate = check(src)
    assert kernels_in(candidate) == 1 and "tl.floor" not in candidate


def test_area_is_adaptive_average_pooling():
    check(interp("size=(2, 5), mode='area'"))


def test_interpolate_fused_with_elementwise_before_and_after():
    src = program("y = torch.sigmoid(a) * 2\n"
                  "y = F.interpolate(y, scale_factor=1.5, mode='bilinear', align_corners=False)\n"
                  "return torch.relu(y - 0.5)", [X4])
    candidate = check(src)
    assert kernels_in(candidate) == 1
    assert "tl.sigmoid" in candidate and "tl.maximum(" in candidate


@pytest.mark.parametrize("init", [
    "self.up = nn.Upsample(scale_factor=2, mode='nearest')",
    "self.up = nn.Upsample(scale_factor=1.5, mode='nearest')",
    "self.up = nn.Upsample(size=(6, 7), mode='bilinear', align_corners=True)",
    "self.up = nn.Upsample(scale_factor=(2, 3), mode='bilinear')",
    "self.up = nn.UpsamplingNearest2d(scale_factor=3)",
    "self.up = nn.UpsamplingBilinear2d(size=(7, 3))",
])
def test_upsample_modules(init):
    check(program("return self.up(a)", [X4], init=init))


# ---------------------------------------------------------------- refusals


@pytest.mark.parametrize("args, reason", [
    ("size=(2, 3), mode='bilinear', antialias=True", "antialias"),
    ("scale_factor=(1.1, 2), mode='nearest'", "keeps size 4"),  # 4 -> 4, scale not 1
    ("scale_factor=(2, 2.1), mode='nearest'", "doubles size 5"),  # 5 -> 10, scale not 2
    ("scale_factor=(1.1, 2), mode='bilinear'", "keeps size 4"),
])
def test_unsupported_interpolations_name_the_operator(args, reason):
    src = interp(args)
    with pytest.raises(UnsupportedOperatorError) as info:
        compile_program(src, CompilerConfig(device="cpu"))
    assert info.value.operator == "F.interpolate"
    assert reason in info.value.reason
    assert "F.interpolate" in info.value.text


def test_unsupported_upsample_module_names_the_module():
    src = program("return self.up(a)", [X4],
                  init="self.up = nn.Upsample(scale_factor=(1.1, 2), mode='nearest')")
    with pytest.raises(UnsupportedOperatorError, match="nn.Upsample") as info:
        compile_program(src, CompilerConfig(device="cpu"))
    assert "keeps size 4" in info.value.reason


# ---------------------------------------------------------------- pixel shuffle


@pytest.mark.parametrize("body, shape", [
    ("return F.pixel_shuffle(a, 2)", (2, 8, 3, 4)),
    ("return torch.pixel_shuffle(a, 3) + 1", (3, 2, 9, 3, 2)),  # extra batch dim
    ("return F.pixel_unshuffle(a, 2)", (2, 3, 4, 6)),
    ("return F.pixel_unshuffle(torch.tanh(a), 3) * 2", (1, 2, 6, 3)),
])
def test_pixel_shuffle_functions(body, shape):
    assert kernels_in(check(program(body, [shape]))) == 1


def test_pixel_shuffle_modules_round_trip():
    init = "self.sh = nn.PixelShuffle(2)\nself.un = nn.PixelUnshuffle(2)"
    check(program("return self.sh(a)", [(2, 12, 4, 5)], init=init))
    check(program("y = self.un(self.sh(a))\nreturn y, y - a", [(2, 12, 4, 5)], init=init))


# ---------------------------------------------------------------- roll


@pytest.mark.parametrize("body", [
    "return torch.roll(a, 2, 1)",
    "return torch.roll(a, shifts=(-1, 7), dims=(0, 2))",  # negative, larger than the size
    "return torch.roll(a, shifts=-13)",  # dims=None: the flattened tensor
    "return a.roll(3, dims=-1) * 2",
    "return a.roll((1, 1), (1, 2))",
    "return torch.roll(torch.relu(a), shifts=(5,), dims=(1,))",  # a whole turn: unchanged
])
def test_roll(body):
    check(program(body, [(3, 5, 4)]))


def test_roll_there_and_back_is_identity():
    src = program("y = torch.roll(a, shifts=(-1, -2), dims=(1, 2))\n"
                  "return torch.roll(y + 1, shifts=(1, 2), dims=(1, 2))", [(2, 4, 6, 3)])
    assert kernels_in(check(src)) == 1


# ---------------------------------------------------------------- affine_grid, grid_sample

STN = """
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    \"\"\"A spatial transformer's sampler: an affine grid from predicted parameters, then the
    input read at it.\"\"\"

    def __init__(self):
        super().__init__()
        self.loc = nn.Linear(3 * 6 * 7, 6)

    def forward(self, x):
        theta = self.loc(x.flatten(1)).view(-1, 2, 3) * 0.5 + torch.tensor(
            [[1.2, 0.1, 0.3], [-0.2, 0.9, -0.4]], device=x.device)
        grid = F.affine_grid(theta, [x.size(0), 3, OUT], align_corners=ALIGN)
        return F.grid_sample(x, grid, padding_mode=PAD, align_corners=ALIGN)


def get_inputs():
    return [torch.randn(2, 3, 6, 7)]


def get_init_inputs():
    return []
"""


@pytest.mark.parametrize("align", [False, True])
@pytest.mark.parametrize("pad", ["zeros", "border"])
@pytest.mark.parametrize("out", ["6, 7", "4, 9"])
def test_affine_grid_and_grid_sample(align, pad, out):
    """Grid points past the border (a scale above 1, a shift) read zeros or the border."""
    src = STN.replace("OUT", out).replace("ALIGN", str(align)).replace("PAD", repr(pad))
    check(src, atol=1e-5, rtol=1e-5)
    check(src, atol=1e-5, rtol=1e-5, capture="export")  # aten's grid ops map onto the same


def test_backward_warp_by_a_flow_field():
    body = """
n, _, h, w = a.shape
ys, xs = torch.meshgrid(torch.arange(h, device=a.device), torch.arange(w, device=a.device),
                        indexing="ij")
gx = 2.0 * (xs[None] + b[:, 0]) / (w - 1) - 1.0
gy = 2.0 * (ys[None] + b[:, 1]) / (h - 1) - 1.0
return F.grid_sample(a, torch.stack((gx, gy), dim=-1), align_corners=True)
"""
    check(program(body, [(2, 3, 5, 6), (2, 2, 5, 6)]), atol=1e-5, rtol=1e-5)


def test_grid_sample_modes_not_lowered_are_refused():
    src = program("return F.grid_sample(a, b, mode='nearest', align_corners=False)",
                  [(1, 2, 4, 4), (1, 3, 3, 2)])
    with pytest.raises(UnsupportedOperatorError, match="nearest") as info:
        compile_program(src, CompilerConfig(device="cpu"))
    assert info.value.line > 0
