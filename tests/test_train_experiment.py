"""The learning experiment's plan at toy size: every stage runs offline on the CPU, resumes, and
leaves a summary with finite metrics."""

from __future__ import annotations

import json
import math
import os
from pathlib import Path

import pytest
import tomllib

os.environ.setdefault("TRITON_INTERPRET", "1")

REPO = Path(__file__).resolve().parents[1]


def _toy_plan(tmp_path: Path, **changes) -> Path:
    data = tomllib.loads((REPO / "benchmarks/plans/learning_cpu.toml").read_text())
    data |= {"out": str(tmp_path / "run"), "results": str(tmp_path / "results"), **changes}
    lines = [f"{k} = {json.dumps(v)}" for k, v in data.items()]
    path = tmp_path / "plan.toml"
    path.write_text("\n".join(lines) + "\n")
    return path


def test_the_toy_plan_runs_every_stage_and_resumes(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    from typer.testing import CliRunner

    from drtriton.cli import app
    from drtriton.train.experiment import STAGES

    plan = _toy_plan(tmp_path)
    (tmp_path / "results").mkdir()
    (tmp_path / "results" / "summary.json").write_text('{"earlier": "run"}')
    prepared = CliRunner().invoke(app, ["learn", "--plan", str(plan), "--until", "untrained"])
    assert prepared.exit_code == 0, prepared.output
    # no held-out evaluation yet: an earlier run's results stay, the run keeps its own summary
    assert json.loads((tmp_path / "results" / "summary.json").read_text()) == {"earlier": "run"}
    assert "summary.json" in prepared.output and (tmp_path / "run" / "summary.json").exists()
    part = CliRunner().invoke(app, ["learn", "--plan", str(plan), "--until", "eval_sft"])
    assert part.exit_code == 0, part.output
    run = tmp_path / "run"
    assert (run / "eval_sft.done").exists() and not (run / "drpo.done").exists()
    early = json.loads((tmp_path / "results" / "summary.json").read_text())["levels"]["1"]
    assert early["sft"]["n"] == 1 and early["drpo"] == {"accuracy": None,
                                                        "mean_speedup_correct": None, "n": 0}
    done = CliRunner().invoke(app, ["learn", "--plan", str(plan)])
    assert done.exit_code == 0, done.output
    assert "stage sft" not in done.output and "stage drpo" in done.output
    summary = json.loads((tmp_path / "results" / "summary.json").read_text())
    assert set(summary["levels"]) == {"1", "2"}
    for stages in summary["levels"].values():
        assert set(stages) == set(STAGES)
        for metrics in stages.values():
            assert metrics["n"] == 1 and 0.0 <= metrics["accuracy"] <= 1.0
    costs = summary["rl_step_costs_s"]
    assert set(costs) == {"drpo", "grpo"}
    assert all(math.isfinite(v) for c in costs.values() for k, v in c.items()
               if k.startswith("time_"))
    assert summary["pairs"]["pairs"] >= 1 and summary["environment"]["git_commit"]
    sft = summary["sft"]
    assert sft["steps"] == 2 and math.isfinite(sft["last_loss"]) and sft["train_runtime_s"] > 0
    pairs = (run / "pairs.jsonl").read_text().splitlines()
    answers = [json.loads(line)["answer"] for line in pairs]
    assert answers and all("Shapes:\nx0: float32[" in a for a in answers)  # pairs_shape_notes
    # a second run finds every stage done and only rewrites the summary
    again = CliRunner().invoke(app, ["learn", "--plan", str(plan)])
    assert again.exit_code == 0 and "stage " not in again.output


def test_prepare_for_cuda_writes_the_unjudged_pairs_and_leaves_the_gpu_stages(tmp_path):
    from typer.testing import CliRunner

    from drtriton.cli import app

    plan = _toy_plan(tmp_path, train_programs_per_level=6, pairs_verify_fraction=0.5)
    args = ["learn", "--plan", str(plan), "--prepare-for", "cuda"]
    first = CliRunner().invoke(app, args)
    assert first.exit_code == 0, first.output
    run = tmp_path / "run"
    assert (run / "untrained.done").exists()
    assert not (run / "eval_untrained.done").exists() and not (run / "pairs.done").exists()
    trained = len((run / "train_programs.jsonl").read_text().splitlines())
    ledger = [json.loads(line) for line in (run / "pairs.jsonl.programs.jsonl").open()]
    pairs = [json.loads(line) for line in (run / "pairs.jsonl").open()]
    assert 0 < len(ledger) < trained  # the judged sample's programs are left for the GPU
    assert pairs and all(p["verdict"] is None and "device: cuda" in p["answer"] for p in pairs)
    assert f"{trained - len(ledger)} programs left to judge" in first.output
    again = CliRunner().invoke(app, args)  # resumes: nothing is written twice
    assert again.exit_code == 0 and "stage " not in again.output
    assert len((run / "pairs.jsonl").read_text().splitlines()) == len(pairs)


@pytest.mark.parametrize("extra, message", [
    (["--prepare-for", "tpu"], "--prepare-for takes cpu or cuda"),
    (["--prepare-for", "cuda", "--until", "sft"], "exclude each other"),
])
def test_a_bad_prepare_is_one_line(tmp_path, extra, message):
    from typer.testing import CliRunner

    from drtriton.cli import app

    done = CliRunner().invoke(app, ["learn", "--plan", str(_toy_plan(tmp_path)), *extra])
    assert done.exit_code == 2 and message in done.output
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize("change, message", [
    ({"train_seed": 1000003}, "held-out benchmark seed"),
    ({"colour": "red"}, "unknown keys colour"),
    ({"rl_n": 1}, "rl_n at least 2"),
    ({"eval_max_new_tokens": -1}, "eval_max_new_tokens at least 0"),
    ({"eval_temperature": -0.5}, "eval_temperature must be at least 0"),
])
def test_a_bad_plan_is_one_line(tmp_path, change, message):
    from typer.testing import CliRunner

    from drtriton.cli import app

    plan = _toy_plan(tmp_path, **change)
    done = CliRunner().invoke(app, ["learn", "--plan", str(plan)])
    assert done.exit_code == 2 and message in done.output


def test_an_unknown_until_stage_is_one_line(tmp_path):
    from typer.testing import CliRunner

    from drtriton.cli import app

    done = CliRunner().invoke(app, ["learn", "--plan", str(_toy_plan(tmp_path)),
                                    "--until", "sfft"])
    assert done.exit_code == 2 and "unknown stage 'sfft'" in done.output
    assert not (tmp_path / "run").exists()


def test_training_programs_never_include_a_held_out_program(tmp_path):
    from drtriton.train.experiment import decontaminate

    train, held = tmp_path / "train.jsonl", tmp_path / "held.jsonl"
    train.write_text("".join(json.dumps({"id": i, "source": i}) + "\n"
                             for i in ["a", "b", "a", "c", "d"]))
    held.write_text(json.dumps({"id": "c", "source": "c"}) + "\n")
    counts = decontaminate(train, held)
    assert [json.loads(x)["id"] for x in train.read_text().splitlines()] == ["a", "b", "d"]
    assert counts == {"train": 3, "held_out": 1, "dropped": {"held_out": 1, "repeated": 1}}


@pytest.mark.parametrize("stage, temperature", [("sft", 0.0), ("drpo_search", 0.6)])
def test_held_out_answers_use_the_eval_temperature(tmp_path, monkeypatch, stage, temperature):
    """Greedy held-out answers (eval_temperature 0); the search still samples at RL's 0.6."""
    import drtriton.bench
    from drtriton.train.experiment import _evaluate, load_experiment

    seen = []
    monkeypatch.setattr(drtriton.bench, "run_bench", lambda config, out: seen.append(config))
    plan = load_experiment(_toy_plan(tmp_path, eval_temperature=0.0, temperature=0.6))
    _evaluate(stage)(plan, tmp_path)
    assert [c.temperature for c in seen] == [temperature]
    assert seen[0].search == stage.endswith("_search")
