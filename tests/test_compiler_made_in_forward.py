"""Constructs real forwards use: tensors a forward makes for itself (``torch.arange``,
``torch.ones``, constants the trace folds), sizes it reads (``.device``, ``x.shape[1]`` slicing a
buffer), weight norm, masked_fill, flip/select, ceil-mode max pooling: compiled and checked
against PyTorch in the interpreter."""

from __future__ import annotations

import os

os.environ.setdefault("TRITON_INTERPRET", "1")

import pytest  # noqa: E402
import torch  # noqa: E402

from compiler_cases.harness import check, program  # noqa: E402
from drtriton.compiler import CompilerConfig, UnsupportedOperatorError, compile_program  # noqa: E402

BODIES = {
    "arange_of_a_size_on_the_input_device": (
        "pos = torch.arange(a.shape[1], device=a.device, dtype=a.dtype)\n"
        "return a + pos[None, :] * 0.5", [(3, 7)]),
    "traced_arange_constant_and_ones": (
        "return a * torch.arange(2, 16, 2).reshape(1, 7) + torch.ones(3, 7, device=a.device)",
        [(3, 7)]),
    "causal_mask_from_aranges": (
        "i = torch.arange(a.size(0), device=a.device)\n"
        "return (i[:, None] >= i[None, :]).float() * a", [(5, 5)]),
    "full_zeros_like_and_a_float_arange": (
        "return a + torch.full((3, 7), 2.5) + torch.zeros_like(a)"
        " + torch.arange(0.0, 0.7, 0.1).view(1, 7)", [(3, 7)]),
    "literal_tensor_constant": (
        "return a * torch.tensor([1.0, -2.0, 0.5])", [(4, 3)]),
    # a shaped constant keeps its shape through ops: a sum over it counts its elements
    "sum_over_ones_and_a_filled_mean": (
        "return torch.ones(3, 4).sum(0) * 2 + a + (torch.full_like(a, 2.0) * 3).mean()", [(4,)]),
    "tensor_of_numbers_on_the_input_device": (
        "return a * torch.tensor(2.5, device=a.device)"
        " + torch.tensor([1.0, 2.0, 3.0, 4.0, 5.0], device=a.device)", [(3, 5)]),
    "causal_masked_fill_with_minus_inf": (
        "m = torch.ones(5, 5).tril() == 0\n"
        "return torch.softmax(a.masked_fill(m, float('-inf')), -1)", [(5, 5)]),
    "flip_and_select": (
        "return torch.flip(a, dims=[1]) + a.flip(0) + a.select(1, 2)[:, None]"
        " + torch.select(a, 0, -1).sum()", [(3, 5)]),
    "ones_like_int_and_full_like": (
        "return a + torch.ones_like(a, dtype=torch.int64) + torch.full_like(a, -1.5)", [(2, 5)]),
}


@pytest.mark.parametrize("name", sorted(BODIES))
def test_tensors_made_in_forward(name):
    body, shapes = BODIES[name]
    src = program(body, shapes)
    check(src, atol=1e-5, rtol=1.3e-6, equal_nan=False)


def test_a_literal_constant_is_a_buffer_made_once_not_pytorch_work_in_forward():
    src = program("return a * torch.tensor([1.0, -2.0, 0.5])", [(4, 3)])
    candidate = compile_program(src, CompilerConfig(device="cpu"))
    init, forward = candidate.split("def forward")
    assert "register_buffer('c__tensor_constant0', torch.tensor(" in init
    assert "torch.tensor(" not in forward


BUFFER_SLICE = '''
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, longest, dim):
        super().__init__()
        self.register_buffer("table", torch.randn(longest, dim))

    def forward(self, x):
        s = x.shape[1]
        return x * self.table[:s]


def get_inputs():
    return [torch.randn(2, 6, 4)]


def get_init_inputs():
    return [10, 4]
'''


def test_a_buffer_sliced_by_a_size_of_the_input_traces_with_known_shapes():
    check(BUFFER_SLICE, atol=1e-5, rtol=1.3e-6, equal_nan=False)


def test_a_large_buffer_sliced_in_forward_is_read_from_the_buffer_not_copied():
    # 8192 x 4 elements: written into ModelNew as a constant it would be refused (too large)
    src = BUFFER_SLICE.replace("return [10, 4]", "return [8192, 4]")
    candidate = compile_program(src, CompilerConfig(device="cpu"))
    assert "self.table" in candidate and "_tensor_constant" not in candidate
    check(src, atol=1e-5, rtol=1.3e-6, equal_nan=False)


def test_a_large_constant_made_in_forward_is_refused_by_fx_and_computed_by_auto():
    """fx folds ``linspace`` into a constant too large to write into ``forward``; torch.export
    keeps it as ATen ops, which the default capture lowers to index arithmetic."""
    src = program("return a + torch.linspace(-1.0, 1.0, 5000) ** 3", [(5000,)])
    with pytest.raises(UnsupportedOperatorError, match="5000 elements"):
        compile_program(src, CompilerConfig(device="cpu", capture="fx"))
    assert "register_buffer" not in check(src)


WEIGHT_NORMED = '''
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        wn = nn.utils.parametrizations.weight_norm
        self.conv = wn(nn.Conv1d(6, 5, 3, padding=2, dilation=2))
        self.fc = wn(nn.Linear(7, 4), dim=DIM)

    def forward(self, x):
        return self.fc(torch.relu(self.conv(x)[:, :, :-1]))


def get_inputs():
    return [torch.randn(2, 6, 8)]


def get_init_inputs():
    return []
'''


@pytest.mark.parametrize("dim", ["0", "1", "None"])
def test_weight_normed_modules_compute_their_weight(dim):
    """``weight_norm`` parametrizations: the weight is v * (g / ||v||) over every dim but ``dim``
    (all of them for dim=None)."""
    src = WEIGHT_NORMED.replace("DIM", dim)
    check(src, atol=1e-5, rtol=1.3e-6, equal_nan=False)


def test_the_old_weight_norm_hook_converts_through_torch_export():
    """``torch.nn.utils.weight_norm`` (HiFi-GAN's, a forward pre-hook that sets a computed
    ``weight``): such a model does not deep-copy, which stopped the export capture with a
    RuntimeError; it is exported unmoved, the hook's computation in its graph."""
    src = WEIGHT_NORMED.replace("nn.utils.parametrizations.weight_norm",
                                "nn.utils.weight_norm").replace("DIM", "0")
    candidate = check(src, atol=1e-5, rtol=1.3e-6, equal_nan=False)
    assert "weight_g" in candidate


def test_a_random_tensor_drawn_in_forward_is_refused_not_frozen():
    """``torch.randn(3)`` without tensor inputs is folded by the trace into a constant; a
    candidate would repeat that one draw, so the compiler refuses it, naming the line."""
    src = program("return a + torch.randn(3)", [(2, 3)])
    with pytest.raises(UnsupportedOperatorError, match="draws random numbers") as err:
        compile_program(src, CompilerConfig(device="cpu"))
    assert err.value.line > 0


SIZE_ZERO = BUFFER_SLICE.replace(
    "        return x * self.table[:s]",
    "        z = torch.zeros(x.size(0), s, 4, device=x.device)\n"
    "        return (x * self.table[:s]).view(x.size(0), -1) + z.view(x.size(0), -1)")


def test_size_of_dim_zero_under_the_shape_tracer_is_that_size():
    """The retrace with known shapes answers ``x.size(0)`` with dim 0's size (fx's MetaProxy
    returned every size for a falsy dim), so ``view(x.size(0), -1)`` and ``zeros`` trace."""
    check(SIZE_ZERO, atol=1e-5, rtol=1.3e-6, equal_nan=False)


@pytest.mark.parametrize(("body", "shapes"), [
    ("return F.max_pool2d(a, 2, ceil_mode=True)", [(1, 2, 5, 5)]),
    ("return F.max_pool2d(a, 3, stride=2, padding=1, ceil_mode=True)", [(2, 3, 8, 7)]),
    ("return F.max_pool1d(a, 3, stride=2, ceil_mode=True)", [(2, 3, 10)]),
    ("return nn.MaxPool2d(3, stride=2, ceil_mode=True)(a)", [(1, 4, 13, 13)]),  # SqueezeNet
])
def test_max_pooling_with_ceil_mode(body, shapes):
    src = program(body, shapes)
    check(src, atol=1e-5, rtol=1.3e-6, equal_nan=False)


@pytest.mark.parametrize(("body", "shapes"), [
    ("return F.avg_pool2d(a, 3, 2, ceil_mode=True)", [(1, 2, 7, 7)]),
    ("return nn.AvgPool2d(3, stride=2, ceil_mode=True)(a)", [(1, 1, 6, 6)]),
    ("return nn.AvgPool2d(2, 2, ceil_mode=True, count_include_pad=False)(a)",  # ResNet-D
     [(2, 3, 7, 5)]),
    ("return F.avg_pool2d(a, 3, 2, padding=1, ceil_mode=True)", [(1, 2, 8, 6)]),
    ("return F.avg_pool2d(a, 2, padding=1, count_include_pad=False)", [(1, 2, 4, 5)]),
    ("return F.avg_pool1d(a, 4, 3, padding=2, ceil_mode=True, count_include_pad=False)",
     [(2, 3, 11)]),
    ("return F.avg_pool3d(a, 2, ceil_mode=True, divisor_override=3)", [(1, 2, 3, 5, 4)]),
    ("return nn.AvgPool2d(3, 1, padding=1, divisor_override=9)(a)", [(1, 2, 5, 5)]),
])
def test_average_pooling_divides_as_pytorch(body, shapes):
    """Windows hanging over the input (``ceil_mode``), padding left uncounted and a divisor
    override: each window's divisor is PyTorch's, clipped per output position."""
    src = program(body, shapes)
    check(src, atol=1e-5, rtol=1.3e-6, equal_nan=False)


SCALAR_INPUTS = '''import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x, alpha, steps, relu, bias):
        y = x * alpha
        for _ in range(steps):
            y = y + 1.0
        if relu:
            y = torch.relu(y)
        if bias is not None:
            y = y + bias
        return y


def get_inputs():
    return [torch.randn(4, 8), {alpha}, 2, {relu}, None]


def get_init_inputs():
    return []
'''


@pytest.mark.parametrize("alpha, relu", [(0.5, True), (-1.5, False)])
def test_python_scalar_forward_inputs_are_specialised(alpha, relu):
    """Numbers, bools and None passed to forward (a scale, a loop count, a flag, an optional
    tensor left out) specialise the trace, as the inputs' shapes do; ModelNew keeps the
    signature."""
    candidate = check(SCALAR_INPUTS.format(alpha=alpha, relu=relu))
    assert "def forward(self, x, alpha_1, steps_1, relu_1, bias_1)" in candidate
    assert ("tl.maximum" in candidate) == relu


@pytest.mark.parametrize("alpha, steps, relu, with_bias, name", [
    (0.25, 2, True, False, "alpha"), (0.5, 3, True, False, "steps"),
    (0.5, 2, False, False, "relu"), (0.5, 2, True, True, "bias"),
])
def test_python_scalars_other_than_the_specialised_ones_are_refused(
        alpha, steps, relu, with_bias, name):
    """The scalars' values are baked into the kernels: ModelNew refuses other values in one
    line (it returned the specialised result silently) and runs with the traced ones."""
    candidate = compile_program(SCALAR_INPUTS.format(alpha=0.5, relu=True),
                                CompilerConfig(device="cpu"))
    namespace: dict = {}
    exec(compile(candidate, "<candidate>", "exec"), namespace)
    model, x = namespace["ModelNew"](), torch.randn(4, 8)
    torch.testing.assert_close(model(x, 0.5, 2, True, None), torch.relu(x * 0.5 + 2.0))
    with pytest.raises(ValueError, match=f"specialised to {name}="):
        model(x, alpha, steps, relu, x if with_bias else None)


DEFAULTS_LEFT_OUT = SCALAR_INPUTS.replace(
    "def forward(self, x, alpha, steps, relu, bias):",
    "def forward(self, x, alpha, steps=2, relu: bool = True, bias=None):").replace(
    "return [torch.randn(4, 8), {alpha}, 2, {relu}, None]", "return [torch.randn(4, 8), 0.5]")


def test_forward_parameters_get_inputs_leaves_out_take_their_defaults():
    """``forward(self, x, mask=None)`` called without the mask: the trace is specialised to the
    defaults (the optional tensor was traced as a tensor and capture failed) and ModelNew's
    forward keeps them, so it is called as Model's is."""
    candidate = check(DEFAULTS_LEFT_OUT)
    assert "def forward(self, x, alpha_1, steps_1=2, relu_1=True, bias_1=None)" in candidate


def test_inputs_that_need_real_data_still_capture():
    """Regression: ``get_inputs`` that cannot run on the meta device (it reads a value) was
    called there again to look for Python scalars, and capture failed."""
    source = program("return torch.relu(a) * 2", [(4, 8)]).replace(
        "def get_inputs():\n", "def get_inputs():\n    assert int(torch.tensor(3).item()) == 3\n")
    assert "assert int(torch.tensor(3).item())" in source
    check(source)


WINDOWS = '''
import torch
import torch.nn as nn
import torch.nn.functional as F


def window_reverse(windows, window, H, W):
    B = int(windows.shape[0] / (H * W / window / window))
    x = windows.view(B, H // window, W // window, window, window, -1)
    return x.permute(0, 1, 3, 2, 4, 5).contiguous().view(B, H, W, -1)


class Model(nn.Module):
    def __init__(self, dim, window):
        super().__init__()
        self.window = window
        self.proj = nn.Linear(dim, dim)

    def forward(self, x):
        B, H, W, C = x.shape
        pad = (self.window - W % self.window) % self.window
        if pad > 0:  # Python control flow on sizes: the shape tracer makes them ints
            x = F.pad(x, (0, 0, 0, pad, 0, pad))
        _, Hp, Wp, _ = x.shape
        w = x.view(B, Hp // self.window, self.window, Wp // self.window, self.window, C)
        w = w.permute(0, 1, 3, 2, 4, 5).reshape(-1, self.window * self.window, C)
        w = self.proj(w)  # a kept module: its output's shape comes from meta weights
        keep = (1,) * (w.ndim - 1)
        y = window_reverse(w * torch.ones(keep, device=x.device), self.window, Hp, Wp)
        return y[:, :H, :W, :]


def get_inputs():
    return [torch.randn(2, 5, 5, 4)]


def get_init_inputs():
    return [4, 2]
'''


@pytest.mark.parametrize("mode", ["strict", "hybrid"])
def test_sizes_of_a_kept_modules_output_are_ints_under_the_shape_tracer(mode):
    check(WINDOWS, mode)
