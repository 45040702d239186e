"""Idioms found in whole models (GCN, PointNet, Llama/T5, WaveNet, minGPT, Conformer, CBAM,
AlexNet, timm, YOLO): ``torch.eye``, ``type_as``, ``x.new_zeros``, ``F.one_hot``, ``math.sqrt``
of a size, ``F.glu``, adaptive max pooling and adaptive pooling of non-dividing sizes,
``x.ndim``, ``torch.meshgrid``, keyword ``split``, ``isinf``, ``outer``, cosine similarity,
binary and class-weighted cross entropy, n-ary ``einsum`` and ``nn.MultiheadAttention`` masks;
each compiled strict and hybrid and compared with PyTorch in the Triton interpreter.

Run: .venv/bin/python -m pytest -q tests/test_compiler_model_idioms.py
"""

from __future__ import annotations

import os
import re

os.environ.setdefault("TRITON_INTERPRET", "1")

import pytest  # noqa: E402
import torch  # noqa: E402

from compiler_cases.harness import HEAD, check, program, run_pair  # noqa: E402
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


# ------------------------------------------------------------------ 11. isinf / isnan / isfinite


@MODES
def test_isinf_gcn_degree_normalisation_of_isolated_nodes(mode):
    """GCN without self loops: an isolated node has degree 0, ``deg.pow(-0.5)`` is inf there
    (in the interpreter too) and ``torch.where(torch.isinf(...), 0, ...)`` zeroes it."""
    src = _prog("""
deg = a.sum(dim=1)
d_inv_sqrt = deg.pow(-0.5)
d_inv_sqrt = torch.where(torch.isinf(d_inv_sqrt), torch.zeros_like(d_inv_sqrt), d_inv_sqrt)
norm = d_inv_sqrt.unsqueeze(1) * a * d_inv_sqrt.unsqueeze(0)
return norm @ self.lin(x), d_inv_sqrt
""", """a = (torch.rand(6, 6) > 0.5).float()
a = ((a + a.t()) > 0).float()
a[2, :] = 0
a[:, 2] = 0
return [torch.randn(6, 4), a]""", "self.lin = nn.Linear(4, 3)", "x, a")
    _check(src, mode)


@MODES
def test_isnan_isfinite_isposinf_isneginf_and_nan_to_num(mode):
    """Masks of non-finite values (float and integer inputs), as a loss guard writes them."""
    src = _prog("""
y = torch.log(x)
bad = torch.isnan(y) | y.isinf()
clean = y.masked_fill(~torch.isfinite(y), 0.0)
return (bad, clean, torch.isposinf(1.0 / x), torch.isneginf(y), torch.nan_to_num(y),
        torch.nan_to_num(1.0 / x, nan=0.5, posinf=9.0, neginf=-9.0), torch.isinf(n),
        torch.isfinite(n), n.isnan())
""", """x = torch.randn(4, 5)
x[0, 0] = 0.0
x[1, 1] = -0.0
return [x, torch.randint(-3, 3, (4, 5))]""", args="x, n")
    _check(src, mode)


@MODES
def test_invert_and_logical_not_of_masks_and_integers(mode):
    """``~mask`` (bool: logical not), ``~n`` of an integer tensor (``-n - 1``), logical_not."""
    src = _prog("""
keep = ~torch.isnan(x)
return keep, ~n, torch.logical_not(n), x.isfinite().logical_not(), torch.bitwise_not(keep)
""", """x = torch.randn(3, 4)
x[1, 2] = float("nan")
return [x, torch.randint(-3, 3, (3, 4))]""", args="x, n")
    _check(src, mode)


@MODES
def test_xor_and_logical_ops_of_masks_and_integers(mode):
    """``^`` of masks, bitwise ``&``, ``|``, ``^`` of integers, and the logical ops, which take
    each operand's truth: ``logical_and(1, 2)`` is True where ``1 & 2`` is 0."""
    src = _prog("""
flip = (x > 0) ^ (n > 0)
flip ^= x < -1
both, one = torch.logical_and(n, m), torch.logical_xor(x, m)
return flip, both, one, torch.logical_or(n, m), n & m, n | m, n ^ m, torch.bitwise_xor(n, 3)
""", """n = torch.tensor([1, 2, 0, 3, 1, 2, 3, 0, 1, 2, 0, 2])
return [torch.randn(12), n, n.flip(0) * 2]""", args="x, n, m")
    _check(src, mode)


@MODES
def test_shifts_and_small_integer_dtypes(mode):
    """``<<`` and ``>>`` (arithmetic for negatives), and uint8, int8 and int16 tensors: a
    uint8 sum wraps at 256 as PyTorch's does."""
    src = _prog("""
packed, low = (n << 4) | (n >> 1), (n * 3).to(torch.int8)
return packed, torch.bitwise_right_shift(-n, 2), img + 1, img / 255.0, low, img.short() - 200
""", """img = torch.randint(0, 256, (4, 6), dtype=torch.uint8)
img[0, 0] = 255
return [img, torch.randint(0, 16, (4, 6), dtype=torch.int32)]""", args="img, n")
    _check(src, mode)


@MODES
def test_float_floor_division_and_rounding_to_decimals(mode):
    """``7.7 // 0.7`` is 10 in PyTorch and Python (from fmod), not ``floor(7.7 / 0.7)`` = 11;
    ``round(x, decimals=d)`` rounds ``x * 10**d`` half to even (``decimals`` was ignored)."""
    src = _prog("""
q = torch.div(x, -0.3, rounding_mode="floor")
return x // 0.7, q, torch.floor_divide(x, y), torch.round(x, decimals=1), x.round(decimals=-1)
""", """x = torch.tensor([7.7, 1.0, -2.1, 0.25, -0.35, 1.26, 15.0, -25.0, 0.0, -0.0, 3.5, 2.1])
y = torch.tensor([0.7, -0.3, 0.0, 0.1, 2.0, -1.5, 0.5, 4.0, 3.0, -2.0, 0.5, 0.7])
return [x, y]""", args="x, y")
    _check(src, mode)


@MODES
def test_integer_sums_and_scans_are_exact_int64_and_dtype_arguments_cast(mode):
    """HF's ``attention_mask.sum(1) - 1`` and ``cumsum(-1)`` position ids: integer sums,
    extremes and scans run in int64 (values past 2**24 stay exact; a cumsum in float32 turned
    16777217 + 1 into 16777216), and ``dtype=`` casts before the op; ``.data`` is the tensor."""
    src = _prog("""
last = h[torch.arange(h.shape[0]), m.sum(dim=1) - 1]
pos = m.cumsum(-1) * m
return (last, pos, torch.cumsum(ids, dim=1), ids.amax(1), ids.amin(0), ids.cumprod(1),
        torch.sum(m, 1, dtype=torch.float32), torch.softmax(h.data, -1, dtype=torch.float64),
        (m > 0).sum(), m.to(torch.int32).sum(-1), ids.sum())
""", """m = torch.ones(2, 5, dtype=torch.long)
m[0, 3:] = 0
ids = torch.randint(-2**40, 2**40, (3, 7))
ids[:, 0] = 16777217
return [torch.randn(2, 5, 4), m, ids]""", args="h, m, ids")
    _check(src, mode)


# ------------------------------------------------------------------ 12. torch.outer


@MODES
def test_outer_llama_rotary_frequencies(mode):
    """Llama's rotary table: positions times inverse frequencies (``torch.outer``), duplicated,
    cos and sin applied to the queries (rotate_half form)."""
    src = _prog("""
t = torch.arange(x.shape[1], device=x.device, dtype=self.inv_freq.dtype)
freqs = torch.outer(t, self.inv_freq)
emb = torch.cat((freqs, freqs), dim=-1)
cos, sin = emb.cos(), emb.sin()
x1, x2 = x[..., : x.shape[-1] // 2], x[..., x.shape[-1] // 2:]
return x * cos + torch.cat((-x2, x1), dim=-1) * sin, torch.ger(t, t), t.outer(self.inv_freq)
""", "return [torch.randn(2, 5, 8)]",
        "inv_freq = 1.0 / (10000.0 ** (torch.arange(0, 8, 2, dtype=torch.int64).float() / 8))\n"
        "self.register_buffer('inv_freq', inv_freq, persistent=False)")
    _check(src, mode)


@MODES
def test_float64_rows_are_reduced_and_scanned_in_float64(mode):
    """The variance of values near 1e7 lost every digit in float32 accumulators."""
    src = _prog("""
return (torch.var(x, dim=-1), x.sum(1), x.mean(0), torch.softmax(x - 1e7, -1), x.cumsum(1),
        x.std(1), torch.logsumexp(x - 1e7, 1), x.amax(1), x.argmax(1), (x / 1e7).prod(1))
""", "return [torch.randn(4, 64, dtype=torch.float64) + 1e7]")
    candidate = compile_program(src, CompilerConfig(mode=mode, device="cpu"))
    want, got = run_pair(src, candidate)
    for w, g in zip(want, got, strict=True):
        assert w.dtype == g.dtype
        torch.testing.assert_close(g, w, atol=1e-6, rtol=1e-12)


@MODES
def test_addmv_addr_and_the_method_forms_of_addmm_with_scales(mode):
    """``beta * input + alpha * product``; with beta 0 the input is ignored, NaN in it too."""
    src = _prog("""
nan = v * float("nan")
return (torch.addmv(v, m, x, beta=0.3, alpha=1.5), v.addmv(m, x), torch.addmv(nan, m, x, beta=0),
        torch.addr(m, v, x, alpha=2.0), m.addr(v, x, beta=0.5), c.addmm(m, m.T, alpha=-1.0),
        c[None].baddbmm(m[None], m.T[None], beta=2.0))
""", "return [torch.randn(6), torch.randn(6, 5), torch.randn(5), torch.randn(6, 6)]",
        args="v, m, x, c")
    _check(src, mode)


@MODES
def test_outer_of_integer_vectors_stays_integer(mode):
    src = _prog("return torch.outer(n, n + 1), torch.outer(x, n)",
                "return [torch.randn(3), torch.randint(-4, 4, (3,))]", args="x, n")
    _check(src, mode)


# ------------------------------------------------------------------ 13. cosine similarity


@MODES
def test_cosine_similarity_siamese_pair_of_normalised_embeddings(mode):
    """A siamese head: shared encoder, ``F.normalize`` then ``F.cosine_similarity`` of the pair
    (each norm clamped to eps on its own, as ATen does: a tiny vector still scores ~0)."""
    src = _prog("""
e1 = F.normalize(self.enc(x1), p=2, dim=1)
e2 = F.normalize(self.enc(x2), p=2, dim=1)
tiny = x1[:, :4] * 1e-9
return (F.cosine_similarity(e1, e2, dim=1, eps=1e-8), F.cosine_similarity(tiny, x2[:, :4]),
        F.pairwise_distance(e1, e2), e1)
""", "return [torch.randn(6, 10), torch.randn(6, 10)]", "self.enc = nn.Linear(10, 8)",
        "x1, x2")
    _check(src, mode)


@MODES
def test_cosine_similarity_module_broadcast_over_a_gallery(mode):
    """Query against gallery: (Q, 1, D) with (1, G, D) broadcast, along the last dim, through
    ``nn.CosineSimilarity``; and ``torch.cosine_similarity`` along dim 0."""
    src = _prog("""
return self.cos(q[:, None, :], g[None, :, :]), torch.cosine_similarity(q, q.flip(0), 0)
""", "return [torch.randn(3, 8), torch.randn(5, 8)]", "self.cos = nn.CosineSimilarity(dim=-1)",
        "q, g")
    _check(src, mode)


# ------------------------------------------------------------------ 14. binary cross entropy


@MODES
def test_bce_with_logits_vae_reconstruction_plus_kl(mode):
    """A VAE's loss: BCE-with-logits summed over the reconstruction plus the KL term; logits
    large enough that a naive ``log(sigmoid(x))`` would overflow."""
    src = _prog("""
mu, logvar = self.enc(x).chunk(2, dim=-1)
logits = self.dec(mu) * 20
bce = F.binary_cross_entropy_with_logits(logits, x, reduction="sum")
kld = -0.5 * torch.sum(1 + logvar - mu.pow(2) - logvar.exp())
return torch.sigmoid(logits), (bce + kld) / x.size(0)
""", "return [torch.rand(4, 12)]", "self.enc = nn.Linear(12, 6)\nself.dec = nn.Linear(3, 12)")
    _check(src, mode)


@MODES
def test_bce_with_logits_multilabel_pos_weight_and_weight(mode):
    """A multi-label head: ``nn.BCEWithLogitsLoss(pos_weight=...)`` with a per-class buffer,
    and the functional form with an element weight and every reduction."""
    src = _prog("""
logits = self.head(x)
kw = dict(weight=self.class_weight, pos_weight=self.pos_weight)
return (self.loss(logits, y), F.binary_cross_entropy_with_logits(logits, y, **kw),
        F.binary_cross_entropy_with_logits(logits, y, reduction="none", **kw),
        F.binary_cross_entropy_with_logits(logits, y, weight=y + 1, reduction="sum"))
""", "return [torch.randn(5, 8), (torch.rand(5, 4) > 0.5).float()]",
        "self.head = nn.Linear(8, 4)\n"
        "self.register_buffer('pos_weight', torch.tensor([1.0, 2.0, 0.5, 3.0]))\n"
        "self.register_buffer('class_weight', torch.linspace(0.5, 1.5, 4))\n"
        "self.loss = nn.BCEWithLogitsLoss(pos_weight=torch.tensor([2.0, 1.0, 1.0, 0.25]))",
        "x, y")
    _check(src, mode)


@MODES
def test_bce_of_probabilities_clamps_the_log_at_minus_100(mode):
    """``F.binary_cross_entropy`` / ``nn.BCELoss`` of sigmoid outputs, some exactly 0 or 1
    (PyTorch clamps each log at -100), soft targets, a weight, every reduction."""
    src = _prog("""
p = torch.sigmoid(self.head(x))
p = torch.where(p > 0.8, torch.ones_like(p), torch.where(p < 0.2, torch.zeros_like(p), p))
return (F.binary_cross_entropy(p, y), F.binary_cross_entropy(p, y, reduction="none"),
        F.binary_cross_entropy(p, y, weight=self.w, reduction="sum"), self.loss(p, y),
        F.binary_cross_entropy(p * 1e-7, y))
""", "return [torch.randn(6, 8) * 3, torch.rand(6, 4)]",
        "self.head = nn.Linear(8, 4)\nself.register_buffer('w', torch.rand(4))\n"
        "self.loss = nn.BCELoss(weight=torch.linspace(1.0, 2.0, 4), reduction='sum')", "x, y")
    _check(src, mode)


# ------------------------------------------------------------------ 15. class-weighted losses

_LABELS = """x = torch.randn(16, 12)
t = torch.randint(0, 6, (16,))
t[3] = -100
t[9] = -100
return [x, t]"""


@MODES
@pytest.mark.parametrize("smoothing", [0.0, 0.1])
def test_cross_entropy_class_weights_with_ignored_labels_every_reduction(mode, smoothing):
    """A classifier trained with class-weighted cross entropy (the weight a buffer): the mean
    divides by the summed weights of the kept labels; with label smoothing the smoothing term is
    weighted per class too."""
    src = _prog(f"""
logits = self.net(x)
kw = dict(weight=self.class_weight, label_smoothing={smoothing})
return (F.cross_entropy(logits, t, **kw), F.cross_entropy(logits, t, reduction="sum", **kw),
        F.cross_entropy(logits, t, reduction="none", **kw), self.loss(logits, t))
""", _LABELS, "self.net = nn.Sequential(nn.Linear(12, 16), nn.ReLU(), nn.Linear(16, 6))\n"
        "self.register_buffer('class_weight', torch.linspace(0.5, 2.0, 6))\n"
        f"self.loss = nn.CrossEntropyLoss(weight=torch.rand(6), label_smoothing={smoothing})",
        "x, t")
    _check(src, mode)


@MODES
def test_cross_entropy_class_weights_segmentation_and_probability_targets(mode):
    """Per-pixel class weights over (N, C, H, W) logits with an in-range ignore_index, and
    class-probability (soft) targets with weights."""
    src = _prog("""
logits = self.conv(x)
soft = torch.softmax(logits.detach() * 0.5, dim=1)
return (F.cross_entropy(logits, t, weight=self.w, ignore_index=2),
        F.cross_entropy(logits, t, weight=self.w, reduction="none", ignore_index=2),
        F.cross_entropy(logits, soft, weight=self.w), F.cross_entropy(logits, soft, weight=self.w,
                                                                       label_smoothing=0.2))
""", "return [torch.randn(2, 3, 4, 5), torch.randint(0, 4, (2, 4, 5))]",
        "self.conv = nn.Conv2d(3, 4, 1)\n"
        "self.register_buffer('w', torch.tensor([1.0, 0.3, 2.0, 0.7]))",
        "x, t")
    _check(src, mode)


@MODES
def test_nll_loss_class_weights_after_log_softmax(mode):
    """``F.nll_loss(log_softmax(...), weight=)`` and ``nn.NLLLoss(weight=)``, ignored labels."""
    src = _prog("""
logp = F.log_softmax(self.fc(x), dim=1)
return (F.nll_loss(logp, t, weight=self.w), F.nll_loss(logp, t, weight=self.w, reduction="sum"),
        F.nll_loss(logp, t, weight=self.w, reduction="none"), self.loss(logp, t))
""", _LABELS, "self.fc = nn.Linear(12, 6)\nself.register_buffer('w', torch.rand(6) + 0.5)\n"
        "self.loss = nn.NLLLoss(weight=torch.linspace(2.0, 0.5, 6))", "x, t")
    _check(src, mode)


# ------------------------------------------------------------------ 16. einsum of three operands


@MODES
def test_einsum_three_operands_mamba_discretisation(mode):
    """Mamba's reference selective scan: ``deltaA = exp(einsum('bld,dn->bldn'))``,
    ``deltaB_u = einsum('bld,bln,bld->bldn', delta, B, u)`` (a broadcast product of three),
    a loop over time, ``einsum('bdn,bn->bd')`` per step."""
    src = _prog("""
delta = F.softplus(self.dt(u))
B, C = self.bc(u).chunk(2, dim=-1)
A = -torch.exp(self.A_log)
deltaA = torch.exp(torch.einsum("bld,dn->bldn", delta, A))
deltaB_u = torch.einsum("bld,bln,bld->bldn", delta, B, u)
x = torch.zeros((u.shape[0], u.shape[2], A.shape[1]), device=u.device)
ys = []
for i in range(u.shape[1]):
    x = deltaA[:, i] * x + deltaB_u[:, i]
    ys.append(torch.einsum("bdn,bn->bd", x, C[:, i, :]))
return torch.stack(ys, dim=1) + u * self.D
""", "return [torch.randn(2, 5, 6)]",
        "self.dt = nn.Linear(6, 6)\nself.bc = nn.Linear(6, 8)\n"
        "self.A_log = nn.Parameter(torch.log(torch.arange(1, 5).float().repeat(6, 1)))\n"
        "self.D = nn.Parameter(torch.ones(6))", "u")
    _check(src, mode)


@MODES
@pytest.mark.parametrize("equation, shapes", [
    ("ij,jk,kl->il", [(3, 4), (4, 5), (5, 2)]),  # a chain of matrix products
    ("bi,bj,bk->bijk", [(2, 3), (2, 4), (2, 2)]),  # a batched triple outer product
    ("i,ij,j->", [(4,), (4, 5), (5,)]),  # a bilinear form to a scalar
    ("bhd,hd,d->bh", [(2, 3, 4), (3, 4), (4,)]),  # contracted over all three at once
    ("abc,cd,ae->bde", [(2, 3, 4), (4, 5), (2, 3)]),  # a shared index of the first and last
    ("ij,ij,ij->ij", [(3, 1), (1, 4), (3, 4)]),  # size-1 indices broadcast
])
def test_einsum_of_several_operands(mode, equation, shapes):
    names = "abcdefgh"[: len(shapes)]
    src = _prog(f"return torch.einsum('{equation}', {', '.join(names)})",
                f"return [{', '.join(f'torch.randn{s!r}' for s in shapes)}]", args=", ".join(names))
    _check(src, mode)


# ------------------------------------------------------------------ 17. attention masks


@MODES
def test_multihead_attention_key_padding_mask_from_lengths_bert(mode):
    """BERT-style encoder: the key padding mask built from a lengths input (True = padding),
    batch-first self-attention without weights, post-LN residual."""
    src = _prog("""
positions = torch.arange(x.size(1), device=x.device)
key_padding_mask = positions[None, :] >= lengths[:, None]
out, _ = self.attn(x, x, x, key_padding_mask=key_padding_mask, need_weights=False)
return self.norm(x + out)
""", "return [torch.randn(3, 6, 16), torch.tensor([6, 2, 4])]",
        "self.attn = nn.MultiheadAttention(16, 4, batch_first=True)\nself.norm = nn.LayerNorm(16)",
        "x, lengths")
    _check(src, mode)


@MODES
def test_multihead_attention_padding_and_causal_masks_with_default_need_weights(mode):
    """Sequence-first cross-attention called the default way (need_weights=True, only the
    output used): a bool causal ``attn_mask`` with a bool padding mask, then float masks (a
    3-D per-head one plus a float padding mask), then an unbatched call with a padding mask."""
    src = _prog("""
causal = torch.ones(5, 7, dtype=torch.bool).triu(1)
pad = torch.arange(7)[None, :] >= torch.tensor([7, 4])[:, None]
a = self.attn(q, kv, kv, attn_mask=causal, key_padding_mask=pad)[0]
bias = self.bias.repeat(2, 1, 1)
fpad = pad.float() * -1e4
b, _ = self.attn(q, kv, kv, attn_mask=bias, key_padding_mask=fpad)
c = self.attn(q[:, 0], kv[:, 0], kv[:, 0], key_padding_mask=pad[1])[0]
return a, b, c
""", "return [torch.randn(5, 2, 8), torch.randn(7, 2, 8)]",
        "self.attn = nn.MultiheadAttention(8, 2)\n"
        "self.register_buffer('bias', torch.randn(2, 5, 7))", "q, kv")
    _check(src, mode)


@MODES
def test_multihead_attention_weights_used_with_a_padding_mask(mode):
    src = _prog("""
pad = torch.arange(4)[None, :] >= torch.tensor([4, 3])[:, None]
out, weights = self.attn(x, x, x, key_padding_mask=pad)
return out + torch.einsum("bqk,bkd->bqd", weights, out)
""", "return [torch.randn(2, 4, 8)]", "self.attn = nn.MultiheadAttention(8, 2, batch_first=True)")
    _check(src, mode)
