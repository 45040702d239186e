"""``drtriton ops --coverage`` reads the compiler's tables; what it says must be what converting
does."""

from __future__ import annotations

import os

os.environ.setdefault("TRITON_INTERPRET", "1")

import pytest  # noqa: E402
from typer.testing import CliRunner  # noqa: E402

from compiler_cases.harness import program  # noqa: E402
from drtriton.cli import app  # noqa: E402
from drtriton.compiler import CompilerConfig, UnsupportedOperatorError, compile_program  # noqa: E402
from drtriton.compiler.coverage import STATUSES, counts, coverage  # noqa: E402

# one-tensor nn.functional calls: the report's status is checked against a real convert
UNARY = ("gelu", "silu", "mish", "hardshrink", "softshrink", "softmin", "glu", "relu6",
         "logsigmoid", "tanhshrink")


def _status() -> dict[str, str]:
    return {r.name: r.status for r in coverage()}


def test_every_row_has_a_known_kind_and_status_and_names_are_unique():
    rows = coverage()
    assert rows and all(r.status in STATUSES for r in rows)
    assert len({(r.kind, r.name) for r in rows}) == len(rows)
    status = _status()
    assert status["nn.Linear"] == "lowered" and status["nn.Sequential"] == "traced"
    assert sum(sum(c.values()) for c in counts(rows).values()) == len(rows)


@pytest.mark.parametrize("name", UNARY)
def test_a_functions_reported_status_is_what_converting_it_does(name):
    """The Python-API rows describe the fx capture (``auto`` also tries torch.export)."""
    status = _status()[f"F.{name}"]
    dims = "dim=-1" if name in ("softmin", "glu") else ""
    src = program(f"return F.{name}(a{', ' + dims if dims else ''})", [(4, 8)])
    config = CompilerConfig(capture="fx")
    if status == "lowered":
        assert "class ModelNew" in compile_program(src, config)
    else:
        with pytest.raises(UnsupportedOperatorError, match=name):
            compile_program(src, config)


# ATen rows, each checked against a convert through torch.export: (aten name, program body)
ATEN = {
    "add": "return torch.add(a, a, alpha=2)",
    "convolution": "return torch.convolution(a[None, None], a[None, None, :2, :2], None, [1, 1], "
                   "[0, 0], [1, 1], False, [0, 0], 1)",
    "lstm": "return torch.nn.functional.linear(a, a)[:, :1] + self.lstm(a[None])[0][0, :, :1]",
    "sort": "return torch.sort(a, 1)[0]",
    "atan2": "return torch.atan2(a, a + 1)",
}


@pytest.mark.parametrize("name", sorted(ATEN))
def test_an_aten_ops_reported_status_is_what_converting_it_does(name):
    status = _status()[f"aten.{name}"]
    src = program(ATEN[name], [(4, 8)], init="self.lstm = nn.LSTM(8, 1, batch_first=True)")
    config = CompilerConfig(capture="export")
    if status in ("lowered", "decomposed"):
        assert "class ModelNew" in compile_program(src, config)
    else:
        with pytest.raises(UnsupportedOperatorError, match=f"aten.{name} at line"):
            compile_program(src, config)


def test_the_command_lists_and_filters_and_refuses_a_bad_status():
    runner = CliRunner()
    shown = runner.invoke(app, ["ops", "--coverage", "--status", "traced"])
    assert shown.exit_code == 0 and "nn.Sequential" in shown.output
    assert "nn.Linear " not in shown.output
    bad = runner.invoke(app, ["ops", "--coverage", "--status", "maybe"])
    assert bad.exit_code == 2
