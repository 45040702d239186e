"""Idioms found in whole models (GCN, PointNet, Llama/T5, WaveNet, minGPT, Conformer, CBAM,
AlexNet, timm, YOLO): ``torch.eye``, ``type_as``, ``x.new_zeros``, ``F.one_hot``, ``math.sqrt``
of a size, ``F.glu``, adaptive max pooling and adaptive pooling of non-dividing sizes,
``x.ndim``, ``torch.meshgrid`` and keyword ``split``; each compiled strict and hybrid and
compared with PyTorch in the Triton interpreter.

Run: .venv/bin/python -m pytest -q tests/test_compiler_model_idioms.py
"""

from __future__ import annotations

import os
import re

os.environ.setdefault("TRITON_INTERPRET", "1")

import pytest  # noqa: E402

from compiler_cases.harness import HEAD, check, program  # noqa: E402
from drtriton.compiler import CompilerConfig, UnsupportedOperatorError, compile_program  # noqa: E402

MODES = pytest.mark.parametrize("mode", ["strict", "hybrid"])


def _prog(forward: str, inputs: str, init: str = "pass", args: str = "x",
          extra: str = "") -> str:
    """A program whose ``forward(self, <args>)`` runs ``forward``; ``inputs`` is the body of
    ``get_inputs``; ``extra`` is module-level code (imports, helpers) placed before ``Model``."""
    body = "\n".join("        " + ln for ln in forward.strip().splitlines())
    make = "\n".join("    " + ln for ln in inputs.strip().splitlines())
    ctor = "\n".join("        " + ln for ln in init.strip().splitlines())
    return (HEAD + (extra.strip() + "\n\n\n" if extra else "")
            + "class Model(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
            + f"{ctor}\n\n    def forward(self, {args}):\n{body}\n\n\n"
            + f"def get_inputs():\n{make}\n\n\ndef get_init_inputs():\n    return []\n")


def _check(source: str, mode: str) -> str:
    """Compile and compare with PyTorch; strict, the forward calls no torch function but
    ``torch.empty`` (all the work is Triton kernels, constants are buffers made once)."""
    candidate = check(source, mode=mode, atol=1e-5, rtol=1e-5, equal_nan=False)
    if mode == "strict":
        forward = candidate[candidate.index("    def forward("):]
        assert set(re.findall(r"torch\.[\w.]+\(", forward)) <= {"torch.empty("}, forward
    return candidate


# ------------------------------------------------------------------ 1. torch.eye


@MODES
def test_eye_gcn_self_loops(mode):
    """GCN: A + I, normalised by degree, then propagate the features."""
    src = _prog("""
adj = a + torch.eye(a.size(0), device=a.device)
deg = adj.sum(1)
norm = adj / deg[:, None]
return norm @ self.lin(x)
""", "return [torch.randn(5, 4), torch.rand(5, 5)]", "self.lin = nn.Linear(4, 3)", "x, a")
    _check(src, mode)


@MODES
def test_eye_pointnet_tnet_identity_repeated_over_the_batch(mode):
    """PointNet T-Net: the predicted matrix plus a flattened identity repeated per batch row."""
    src = _prog("""
k = 3
m = self.fc(x)
iden = torch.eye(k, dtype=x.dtype, device=x.device).flatten().view(1, k * k).repeat(x.size(0), 1)
return (m + iden).view(-1, k, k), m + torch.eye(k).flatten()
""", "return [torch.randn(2, 5)]", "self.fc = nn.Linear(5, 9)")
    _check(src, mode)


@MODES
def test_eye_rectangular_and_typed(mode):
    src = program("n, m = a.shape\n"
                  "return a + torch.eye(n, m), torch.eye(m, n, dtype=torch.int64) * 3,"
                  " torch.eye(n, m, dtype=torch.bool) & (a > 0)", [(3, 5)])
    _check(src, mode)


@MODES
def test_repeat_and_tile_with_more_sizes_than_dims(mode):
    src = program("return a.repeat(2, 1, 3), torch.tile(a, (2,)), a.tile(2, 1, 1) + b.repeat(3, 1)",
                  [(3, 4), (1, 4)])
    _check(src, mode)


# ------------------------------------------------------------------ 2. type_as


RMSNORM = """
class RMSNorm(nn.Module):
    def __init__(self, dim, eps=1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.randn(dim))

    def _norm(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)

    def forward(self, x):
        output = self._norm(x.float()).type_as(x)
        return output * self.weight
"""


@MODES
def test_type_as_llama_rmsnorm(mode):
    src = _prog("return self.norm(x)", "return [torch.randn(2, 3, 8)]", "self.norm = RMSNorm(8)",
                extra=RMSNORM)
    _check(src, mode)


@MODES
def test_type_as_a_mask_cast_to_the_input_dtype_and_to_an_int_tensor(mode):
    src = program("mask = (a > 0).type_as(a)\n"
                  "i = b.long()\n"
                  "return a * mask, (a * 4).type_as(i) + i, a.type_as(b)", [(3, 4), (3, 4)])
    _check(src, mode)


# ------------------------------------------------------------------ 3. x.new_zeros and friends


@MODES
def test_new_zeros_state_before_an_lstm_cell_loop(mode):
    src = _prog("""
h = x.new_zeros(x.size(1), 6)
c = x.new_zeros((x.size(1), 6))
outs = []
for t in range(x.size(0)):
    h, c = self.cell(x[t], (h, c))
    outs.append(h)
return torch.stack(outs)
""", "return [torch.randn(3, 2, 4)]", "self.cell = nn.LSTMCell(4, 6)")
    _check(src, mode)


@MODES
def test_new_ones_full_empty_and_tensor(mode):
    src = program("e = a.new_empty(a.shape).fill_(0.5)\n"
                  "z = a.new_empty((3, 4)).zero_()\n"
                  "return (a.new_ones(a.shape) + a.new_full((3, 4), 2.5) + e + z,"
                  " a.new_zeros(4, dtype=torch.int64) + 2, a * a.new_tensor([1.0, -2.0, 0.5, 3.0]),"
                  " a.new_full([4], 7, dtype=torch.int32), a.new_ones(size=(2, 2)))", [(3, 4)])
    _check(src, mode)


# ------------------------------------------------------------------ 4. F.one_hot


@MODES
def test_one_hot_wavenet_input(mode):
    """WaveNet: integer samples one-hot encoded to channels, then a causal convolution."""
    src = _prog("x = F.one_hot(x, 8).float().transpose(1, 2)\nreturn self.conv(x)",
                "return [torch.randint(0, 8, (2, 5))]", "self.conv = nn.Conv1d(8, 4, 2)")
    _check(src, mode)


@MODES
def test_one_hot_is_int64_with_keyword_classes(mode):
    src = _prog("return F.one_hot(x, num_classes=5), F.one_hot(x[0], 6) * 2",
                "return [torch.randint(0, 5, (3, 4))]")
    _check(src, mode)


def test_one_hot_without_num_classes_is_refused():
    """``num_classes=-1`` sizes the output by the largest label: a data-dependent shape."""
    src = _prog("return F.one_hot(x)", "return [torch.randint(0, 5, (3, 4))]")
    with pytest.raises(UnsupportedOperatorError, match="num_classes"):
        compile_program(src, CompilerConfig(device="cpu"))


# ------------------------------------------------------------------ 5. math on sizes


@MODES
def test_math_sqrt_of_a_size_mingpt_attention(mode):
    src = _prog("""
B, T, C = x.size()
q, k, v = self.c_attn(x).split(C, dim=2)
q = q.view(B, T, 2, C // 2).transpose(1, 2)
k = k.view(B, T, 2, C // 2).transpose(1, 2)
v = v.view(B, T, 2, C // 2).transpose(1, 2)
att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
att = att.masked_fill(self.bias[:, :, :T, :T] == 0, float('-inf'))
att = F.softmax(att, dim=-1)
return (att @ v).transpose(1, 2).contiguous().view(B, T, C)
""", "return [torch.randn(2, 5, 8)]",
        "self.c_attn = nn.Linear(8, 24)\n"
        "self.register_buffer('bias', torch.tril(torch.ones(6, 6)).view(1, 1, 6, 6))",
        extra="import math")
    _check(src, mode)


@MODES
def test_math_functions_of_shape_entries(mode):
    src = _prog("return x * math.log(x.shape[-1]) + math.sqrt(x.shape[0] * 2) / math.ceil(2.5)"
                " + math.exp(-x.size(1))", "return [torch.randn(3, 4)]", extra="import math")
    _check(src, mode)


def test_math_of_a_tensor_value_is_refused():
    src = _prog("return x * math.sqrt(x.abs().sum())", "return [torch.randn(3, 4)]",
                extra="import math")
    with pytest.raises(UnsupportedOperatorError, match="math.sqrt"):
        compile_program(src, CompilerConfig(device="cpu"))


# ------------------------------------------------------------------ 6. F.glu


@MODES
def test_glu_conformer_convolution_module(mode):
    src = _prog("""
x = self.pw1(x.transpose(1, 2))
x = F.glu(x, dim=1)
x = self.dw(x)
return self.glu(self.pw2(x).transpose(1, 2))
""", "return [torch.randn(2, 7, 4)]",
        "self.pw1 = nn.Conv1d(4, 8, 1)\nself.dw = nn.Conv1d(4, 4, 3, padding=1, groups=4)\n"
        "self.pw2 = nn.Conv1d(4, 6, 1)\nself.glu = nn.GLU()")
    _check(src, mode)


# ------------------------------------------------------------------ 7. adaptive pooling


@MODES
def test_adaptive_avg_and_max_pool_cbam_channel_attention(mode):
    src = _prog("""
avg = self.mlp(F.adaptive_avg_pool2d(x, 1))
mx = self.mlp(F.adaptive_max_pool2d(x, 1))
return x * torch.sigmoid(avg + mx) + self.pool(x).mean()
""", "return [torch.randn(2, 6, 5, 4)]",
        "self.mlp = nn.Sequential(nn.Conv2d(6, 3, 1, bias=False), nn.ReLU(),"
        " nn.Conv2d(3, 6, 1, bias=False))\nself.pool = nn.AdaptiveMaxPool2d((1, 2))")
    _check(src, mode)


@MODES
@pytest.mark.parametrize("side", [5, 13])
def test_adaptive_avg_pool_alexnet_six_by_six_of_non_dividing_sizes(mode, side):
    """AlexNet's ``AdaptiveAvgPool2d((6, 6))`` on a 5x5 map (windows overlap: up-sampling) and a
    13x13 one (windows of 2 and 3)."""
    src = _prog("return self.fc(torch.flatten(self.avgpool(x), 1))",
                f"return [torch.randn(2, 3, {side}, {side})]",
                "self.avgpool = nn.AdaptiveAvgPool2d((6, 6))\nself.fc = nn.Linear(3 * 36, 4)")
    _check(src, mode)


@MODES
def test_adaptive_max_pool_of_non_dividing_sizes_and_none(mode):
    src = program("return (nn.AdaptiveMaxPool2d((3, None))(a), F.adaptive_max_pool1d(b, 3),"
                  " F.adaptive_avg_pool1d(b, 4), F.adaptive_max_pool2d(a, (4, 2)),"
                  " F.adaptive_avg_pool3d(c, (2, 3, 2)), F.adaptive_max_pool3d(c, 2))",
                  [(2, 3, 7, 5), (2, 3, 7), (1, 2, 5, 4, 3)])
    _check(src, mode)


@MODES
def test_area_interpolation_of_non_dividing_sizes(mode):
    """``mode='area'`` is adaptive average pooling, so it follows: 4x5 to 3x3."""
    _check(program("return F.interpolate(a, size=(3, 3), mode='area')", [(2, 3, 4, 5)]), mode)


def test_adaptive_max_pool_with_indices_is_refused():
    src = program("return F.adaptive_max_pool2d(a, 2, return_indices=True)[1]", [(1, 2, 4, 4)])
    with pytest.raises(UnsupportedOperatorError, match="return_indices"):
        compile_program(src, CompilerConfig(device="cpu"))


# ------------------------------------------------------------------ 8. x.ndim


@MODES
def test_ndim_and_dim_build_a_per_sample_shape(mode):
    """timm's drop_path shape ``(x.shape[0],) + (1,) * (x.ndim - 1)``, used in eval by a
    per-sample scale."""
    src = program("shape = (a.shape[0],) + (1,) * (a.ndim - 1)\n"
                  "scale = a.abs().mean(dim=tuple(range(1, a.dim()))).view(shape)\n"
                  "return a / (scale + 1.0)", [(2, 3, 4)])
    _check(src, mode)


# ------------------------------------------------------------------ 9. torch.meshgrid


@MODES
def test_meshgrid_yolo_grid_offsets(mode):
    src = program("bs, na, ny, nx, no = a.shape\n"
                  "yv, xv = torch.meshgrid(torch.arange(ny, device=a.device),"
                  " torch.arange(nx, device=a.device), indexing='ij')\n"
                  "grid = torch.stack((xv, yv), 2).view(1, 1, ny, nx, 2).float()\n"
                  "return (a[..., 0:2].sigmoid() + grid) * 8.0", [(2, 3, 4, 5, 6)])
    _check(src, mode)


@MODES
def test_meshgrid_xy_of_a_list_and_float_tensors(mode):
    src = program("gx, gy = torch.meshgrid([torch.arange(a.shape[1]) * 0.5, b], indexing='xy')\n"
                  "return a + gx, gy", [(4, 3), (4,)])
    _check(src, mode)


# ------------------------------------------------------------------ 10. split by keyword


@MODES
def test_split_by_keyword(mode):
    """Regression: ``split_size=`` (the method's name) and ``split_size_or_sections=`` (the
    function's) as keywords crashed with an unexpected keyword argument."""
    src = program("p, q = a.split(split_size=2, dim=1)\n"
                  "r, s, t = torch.split(a, split_size_or_sections=[1, 2, 1], dim=1)\n"
                  "u, v = a.split([3, 1], dim=-1)\n"
                  "return p * q, r + t, s, u.sum(-1) + v[:, 0]", [(3, 4)])
    _check(src, mode)
