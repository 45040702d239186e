"""The README's learning table and chart, generated from a learning summary."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _report():
    spec = importlib.util.spec_from_file_location("report", ROOT / "benchmarks" / "report.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _summary() -> dict:
    cell = {"accuracy": None, "mean_speedup_correct": None, "n": 0}
    return {"plan": "toy", "levels": {
        "1": {"untrained": {"accuracy": 0.0, "mean_speedup_correct": None, "n": 10},
              "sft": {"accuracy": 0.6, "mean_speedup_correct": 1.25, "n": 10},
              "drpo": dict(cell), "grpo": dict(cell), "drpo_search": dict(cell)}},
        "rl_step_costs_s": {"drpo": {"correct_rate": [0.2, 0.5]}},
        "environment": {"gpu": "", "host_cpu": "cpu", "torch": "2", "git_commit": "abc",
                        "date": "2026-12-06T00:00:00"}}


def test_only_evaluated_stages_become_rows():
    rows = _report().learning_rows(_summary())
    assert [(r["stage"], r["accuracy"], r["mean_speedup_correct"]) for r in rows] == [
        ("untrained", "0.00", "-"), ("SFT", "0.60", "1.25")]


def test_the_chart_has_the_rl_curves_when_rl_ran(tmp_path):
    pytest.importorskip("matplotlib")
    path = tmp_path / "learning.png"
    _report()._learning_plot(_summary(), path)
    assert path.read_bytes()[:4] == b"\x89PNG"
