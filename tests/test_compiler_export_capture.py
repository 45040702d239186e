"""The ``torch.export`` front end (``compiler.aten_capture``): every test program and every
real-suite program converts through it and matches PyTorch in the interpreter; under the
default ``capture="auto"`` it converts what ``torch.fx`` cannot; what it cannot map is refused
in one line naming the ATen op and the reference's line.

Run: .venv/bin/python -m pytest -q tests/test_compiler_export_capture.py
"""

from __future__ import annotations

import os

os.environ.setdefault("TRITON_INTERPRET", "1")

from pathlib import Path  # noqa: E402

import pytest  # noqa: E402

from compiler_cases import ops61, realworld  # noqa: E402
from compiler_cases.harness import HEAD, check  # noqa: E402
from drtriton.bench.suites import load_suite, program_source  # noqa: E402
from drtriton.compiler import CompilerConfig, UnsupportedOperatorError, compile_program  # noqa: E402

MODELS = sorted((Path(__file__).parent / "compiler_cases" / "models").glob("*.py"))
REAL = Path(__file__).resolve().parents[1] / "benchmarks" / "suites" / "real"
REAL_PROGRAMS = load_suite(REAL)


def _export(source: str, **kwargs) -> str:
    return check(source, capture="export", **kwargs)


@pytest.mark.parametrize("name", sorted(ops61.CASES))
def test_the_61_operators_convert_through_torch_export(name):
    _export(ops61.source(name))


@pytest.mark.slow  # the fx capture converts them by default (test_compiler_models)
@pytest.mark.parametrize("path", MODELS, ids=lambda p: p.stem)
def test_whole_models_convert_through_torch_export(path):
    _export(path.read_text())


@pytest.mark.slow  # as above (test_compiler_realworld)
@pytest.mark.parametrize("name", sorted(realworld.CASES))
def test_real_world_layers_convert_through_torch_export(name):
    _export(realworld.CASES[name])


@pytest.mark.parametrize("program", REAL_PROGRAMS, ids=lambda p: p.name)
def test_the_real_suite_converts_through_torch_export_at_cpu_size(program):
    _export(program_source(REAL, program, "cpu"))


def _prog(forward: str, inputs: str, init: str = "pass", args: str = "a") -> str:
    body = "\n".join("        " + ln for ln in forward.strip().splitlines())
    return (HEAD + "class Model(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
            + f"        {init}\n\n    def forward(self, {args}):\n{body}\n\n\n"
            + f"def get_inputs():\n    return [{inputs}]\n\n\n"
            + "def get_init_inputs():\n    return []\n")


# programs torch.fx refuses (an nn module or function with no lowering of its own) whose
# decomposition is made of supported ops
DECOMPOSED = {
    "rnn_tanh": _prog("return self.rnn(a)[0]", "torch.randn(2, 5, 4)",
                      "self.rnn = nn.RNN(4, 6, batch_first=True)"),
    "local_response_norm": _prog("return self.lrn(a)", "torch.randn(2, 6, 5, 5)",
                                 "self.lrn = nn.LocalResponseNorm(3)"),
    "lp_pool": _prog("return F.lp_pool2d(a, 2, 2)", "torch.randn(1, 2, 4, 4)"),
    "logaddexp_xlogy": _prog("return torch.logaddexp(a, b) + torch.xlogy(a.abs(), b.abs())",
                             "torch.randn(4, 5), torch.randn(4, 5)", args="a, b"),
    "kron_addcmul": _prog("return torch.kron(a, b) + torch.addcmul(a, a, a, value=0.5)[0, 0]",
                          "torch.randn(2, 3), torch.randn(3, 2)", args="a, b"),
    "diff_aminmax_frac": _prog("return torch.diff(a, dim=1), torch.aminmax(a, dim=1)[1], "
                               "torch.frac(3 * a)", "torch.randn(4, 5)"),
    "cross_product": _prog("return torch.linalg.cross(a, b)",
                           "torch.randn(4, 3), torch.randn(4, 3)", args="a, b"),
    "ranking_losses": _prog(
        "y = torch.ones(4)\n"
        "return (F.margin_ranking_loss(a[:, 0], b[:, 0], y) + F.soft_margin_loss(a, b.sign())\n"
        "        + F.cosine_embedding_loss(a, b, y) + F.poisson_nll_loss(a, b.abs()))",
        "torch.randn(4, 5), torch.randn(4, 5)", args="a, b"),
}


@pytest.mark.parametrize("name", sorted(DECOMPOSED))
def test_auto_capture_converts_what_fx_refuses_through_torch_export(name):
    source = DECOMPOSED[name]
    with pytest.raises(UnsupportedOperatorError):
        compile_program(source, CompilerConfig(device="cpu", capture="fx"))
    check(source, atol=1e-5, rtol=1e-5)  # capture="auto", the default


def test_an_op_with_no_lowering_and_no_decomposition_is_named_with_its_line():
    source = _prog("y = a * 2\nreturn torch.special.i0(y)", "torch.randn(4, 5)")
    with pytest.raises(UnsupportedOperatorError, match=r"^unsupported operator aten\.i0 at "
                       r"line 13: return torch\.special\.i0\(y\) \(no lowering") as refused:
        compile_program(source, CompilerConfig(device="cpu", capture="export"))
    assert "\n" not in str(refused.value)


def test_auto_capture_names_where_each_capture_stopped():
    """fx stops at a call it has no lowering for, export (which decomposes that call) at a
    later one: the one-line error names both, the one to work on included."""
    source = _prog("y = torch.special.xlogy(a.abs(), a)\nreturn torch.special.i0(y)",
                   "torch.randn(4, 5)")
    with pytest.raises(UnsupportedOperatorError, match=r"torch\.special\.xlogy at line 12: .*"
                       r"torch\.export stops at aten\.i0 at line 13\)$") as refused:
        compile_program(source, CompilerConfig(device="cpu"))
    assert "\n" not in str(refused.value)


def test_a_random_draw_in_forward_is_refused_not_frozen():
    source = _prog("return a + torch.randn_like(a)", "torch.randn(4)")
    with pytest.raises(UnsupportedOperatorError, match="aten.randn_like .*random numbers"):
        compile_program(source, CompilerConfig(device="cpu", capture="export"))


def test_dropout_in_eval_mode_or_with_p_zero_is_the_identity():
    source = _prog("return self.drop(a) + F.dropout(a, p=0.0, training=True)",
                   "torch.randn(4, 5)", "self.drop = nn.Dropout(0.5)\n        self.eval()")
    _export(source)


def test_forward_inputs_keep_their_names_scalars_and_defaults():
    source = _prog("return F.relu(a * alpha) if relu else a", "torch.randn(4, 8), 0.5",
                   args="a, alpha, relu=True")
    candidate = _export(source)
    assert "def forward(self, a, alpha, relu=True):" in candidate


def test_batch_norm_in_training_mode_uses_batch_statistics():
    """The exported graph also updates the running statistics; those updates are dropped (a
    candidate returns outputs), and the output uses the batch's own statistics."""
    source = _prog("return self.bn(a)", "torch.randn(6, 4, 3, 3)", "self.bn = nn.BatchNorm2d(4)")
    candidate = _export(source)
    assert "if self.training is not True:" in candidate  # eval mode would compute otherwise


def test_list_inputs_are_refused_in_one_line():
    source = _prog("return a[0] + a[1]", "[torch.randn(3), torch.randn(3)]")
    with pytest.raises(UnsupportedOperatorError, match="lists, tuples or dicts"):
        compile_program(source, CompilerConfig(device="cpu", capture="export"))


def test_capture_must_be_one_of_the_three():
    with pytest.raises(ValueError, match="capture must be one of"):
        CompilerConfig(capture="dynamo")


def test_a_bug_in_mapping_an_op_refuses_the_program_in_one_line(monkeypatch):
    """An adapter that raises (here: forced) is reported as the export capture's internal
    error, so ``auto`` falls back to the fx error rather than crashing."""
    from drtriton.compiler import aten_capture

    def broken(named):
        raise KeyError("dim")

    monkeypatch.setitem(aten_capture.ADAPTERS, "_native_batch_norm_legit_functional", broken)
    source = _prog("return self.bn(a)", "torch.randn(6, 4, 3, 3)", "self.bn = nn.BatchNorm2d(4)")
    with pytest.raises(UnsupportedOperatorError, match="internal error in the export capture: "
                       "KeyError"):
        compile_program(source, CompilerConfig(device="cpu", capture="export"))
    assert "class ModelNew" in compile_program(source, CompilerConfig(device="cpu"))


def test_a_forward_mixing_its_input_with_a_cpu_tensor_is_exported_on_real_inputs():
    """Capture exports meta copies first; ``torch.arange(5)`` made in forward is a CPU tensor
    that a meta input cannot meet, so the export is retried on the real inputs."""
    _export(_prog("return a * torch.arange(5) + torch.tensor([1.0, 2.0, 3.0, 4.0, 5.0])",
                  "torch.randn(4, 5)"))
