"""The operator catalogue: 61 operators, each once, with shape rules PyTorch agrees with."""

import random

import pytest
from ortools.sat.python import cp_model

from drtriton.ops import OP_NAMES, OPS, SCALES, ShapeBuilder, get_op
from drtriton.synth import draw_program

EXPECTED = """Add Sub Mul Div Maximum Minimum Lerp Sum Mean Max Min ArgMax ArgMin Var Norm Matmul
Bmm Transpose ReLU LeakyReLU Sigmoid Tanh SiLU GELU SELU Hardsigmoid Softplus Softsign ELU Hardtanh
Clamp Cos Sin Exp2 LogSigmoid Abs Triu Tril Softmax LogSoftmax CumSum CumMax CumMin BatchNorm
LayerNorm GroupNorm InstanceNorm AvgPool1d AvgPool2d AvgPool3d MaxPool1d MaxPool2d MaxPool3d Conv1d
Conv2d Conv3d ConvTranspose1d ConvTranspose2d ConvTranspose3d Cat Stack""".split()


def test_catalogue_has_exactly_the_61_operators():
    assert len(OPS) == 61
    assert sorted(OP_NAMES) == sorted(EXPECTED)
    assert len(set(OP_NAMES)) == 61


def test_unknown_operator_is_a_clear_error():
    with pytest.raises(KeyError, match="unknown operator 'Foo'"):
        get_op("Foo")


def test_arities():
    assert get_op("Lerp").arity == 3
    assert all(get_op(n).arity == 2 for n in ["Add", "Matmul", "Bmm", "Cat", "Stack"])
    assert get_op("Conv2d").arity == 1  # its weight is a fresh program input, not a pool tensor


def test_product_helper_matches_python():
    model = cp_model.CpModel()
    sb = ShapeBuilder(model, SCALES["small"], random.Random(0))
    dims = [sb.dim() for _ in range(3)]
    for d, v in zip(dims, (3, 5, 7), strict=True):
        model.add(d == v)
    prod = sb.product([*dims, 2], 10_000)
    solver = cp_model.CpSolver()
    assert solver.solve(model) == cp_model.OPTIMAL
    assert solver.value(prod) == 3 * 5 * 7 * 2


def _single_op(name, scale="small", seed=0):
    rng = random.Random(seed)
    for _ in range(50):
        draft = draw_program([name], scale, rng)
        if not isinstance(draft, str):
            return draft
    raise AssertionError(f"{name}: no feasible draw")


def test_matmul_flops_follow_the_model():
    draft = _single_op("Matmul", "gpu")
    a, b = draft.input_shapes
    (out,) = draft.output_shapes
    numel = 1
    for d in out:
        numel *= d
    assert draft.flops == 2 * numel * a[-1]
    assert a[-1] == b[-2]


def test_conv2d_flops_follow_the_model():
    draft = _single_op("Conv2d", "gpu", seed=3)
    x, w = draft.input_shapes
    (out,) = draft.output_shapes
    numel = out[0] * out[1] * out[2] * out[3]
    assert draft.flops == 2 * numel * w[1] * w[2] * w[3]


@pytest.mark.parametrize("name", ["Matmul", "Conv2d", "ConvTranspose3d", "Bmm"])
def test_gpu_scale_heavy_ops_reach_the_flop_band(name):
    lim = SCALES["gpu"]
    draft = _single_op(name, "gpu", seed=1)
    assert lim.flops_lo <= draft.flops <= lim.flops_hi


def test_gpu_scale_elementwise_relaxes_the_band_downward():
    lim = SCALES["gpu"]
    for seed in range(4):
        draft = _single_op("ReLU", "gpu", seed)
        (shape,) = draft.input_shapes
        # one tensor holds at most 2^30 elements (and 8192^rank), so ReLU cannot reach 2^34:
        # the floor is halved, but only as far as needed.
        reachable = min(lim.max_numel, lim.max_dim ** len(shape))
        assert draft.flops < lim.flops_lo
        assert 2 * draft.flops > reachable
