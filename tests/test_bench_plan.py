"""Benchmark plans (``drtriton bench --plan``) and the real-model suite."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from drtriton.bench.plan import (
    PlanError,
    latest_complete,
    load_plan,
    planned_keys,
    read_rows,
    run_plan,
    summary,
)
from drtriton.bench.suites import check_program, load_suite, program_cost, sized_source

REPO = Path(__file__).resolve().parents[1]
REAL = REPO / "benchmarks" / "suites" / "real"


def _plan(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "plan.toml"
    path.write_text(f'name = "t"\nresults = "{tmp_path / "rows.jsonl"}"\n' + body)
    return path


@pytest.mark.parametrize("body, message", [
    ('[[runs]]\nsuite = "real"\nfolder = "x"\nmodes = ["fast"]\n', "mode must be one of"),
    ('[[runs]]\nsuite = "real"\nfolder = "x"\ncolour = 1\n', "unknown key 'colour'"),
    ('[[runs]]\nsuite = "real"\n', "needs a folder"),
    ('[[runs]]\nsuite = "real"\nfolder = "x"\nscale = "huge"\n', "scale must be gpu or cpu"),
    ('runs = []\n', "no runs"),
    ('[[runs\n', "not valid TOML"),
])
def test_bad_plans_are_refused_in_one_line(tmp_path, body, message):
    with pytest.raises(PlanError, match=message) as info:
        load_plan(_plan(tmp_path, body))
    assert "\n" not in str(info.value)


def test_the_shipped_plans_load():
    shipped = sorted((REPO / "benchmarks" / "plans").glob("*.toml"))
    for path in shipped:
        if path.stem.startswith("learning"):  # experiment plans, loaded by their own tests
            continue
        assert planned_keys(load_plan(path)), path.name


def test_sized_source_replaces_top_level_constants_only():
    source = "A, B = 64, 128\nC = 3\n\ndef f():\n    A = 7\n    return A\n"
    out = sized_source(source, {"A": 2, "C": 1})
    assert out.splitlines()[:2] == ["A, B = 2, 128", "C = 1"] and "    A = 7" in out
    with pytest.raises(ValueError, match="D"):
        sized_source(source, {"D": 1})


def test_program_cost_counts_matmul_flops_on_meta():
    source = (REAL / "gpt2_mlp_up.py").read_text()
    cost = program_cost(source)
    assert cost["flops"] == 2 * 32 * 1024 * 768 * 3072
    assert cost["output_bytes"] == 32 * 1024 * 3072 * 4


def test_every_real_program_runs_at_cpu_size_and_costs_at_its_published_size():
    programs = load_suite(REAL)
    assert len(programs) >= 60
    assert len({p.family for p in programs}) >= 10
    failures = [row for row in (check_program(REAL, p) for p in programs) if "error" in row]
    assert failures == []


def test_plan_runs_resumes_and_reports(tmp_path):
    plan = load_plan(
        _plan(
            tmp_path,
            f'device = "cpu"\n[[runs]]\nsuite = "real"\nfolder = "{REAL}"\n'
            'scale = "cpu"\nonly = ["gpt2_mlp_up", "bert_ffn_residual_layernorm"]\n',
        )
    )
    rows = run_plan(plan)
    assert sorted((r["problem"], r["status"]) for r in rows) == [
        ("bert_ffn_residual_layernorm", "correct"), ("gpt2_mlp_up", "correct")]
    assert all(r["commit"] and r["source_sha"] and r["flops"] > 0 for r in rows)
    lines = (tmp_path / "rows.jsonl").read_text().splitlines()
    assert len(run_plan(plan)) == 2 and (tmp_path / "rows.jsonl").read_text().splitlines() == lines
    complete = latest_complete(read_rows(plan.results_path()), planned_keys(plan))
    assert [s["correct"] for s in summary(complete)] == [2]


def test_latest_complete_skips_a_newer_partial_run():
    def row(problem, sha, date):
        return {"suite": "s", "problem": problem, "mode": "strict", "preset": "hardened",
                "policy": "compiler", "search": False, "scale": "gpu", "source_sha": sha,
                "date": date, "status": "correct"}
    keys = {("s", p, "strict", "hardened", "compiler", False, "gpu") for p in ("a", "b")}
    rows = [row("a", "old", "1"), row("b", "old", "1"), row("a", "new", "2")]
    assert {r["source_sha"] for r in latest_complete(rows, keys)} == {"old"}
    assert latest_complete(rows[2:], keys) == []


def test_a_run_is_one_source_tree_on_one_kind_of_device():
    def row(problem, device, date):
        return {"suite": "s", "problem": problem, "mode": "strict", "preset": "hardened",
                "policy": "compiler", "search": False, "scale": "gpu", "source_sha": "t",
                "device": device, "date": date, "status": "correct"}
    keys = {("s", p, "strict", "hardened", "compiler", False, "gpu") for p in ("a", "b")}
    mixed = [row("a", "NVIDIA H200", "1"), row("b", "NVIDIA H100 80GB HBM3", "2")]
    assert latest_complete(mixed, keys) == []  # an H100 row never completes an H200 run
    whole = [*mixed, row("b", "NVIDIA H200", "3")]
    assert {r["device"] for r in latest_complete(whole, keys)} == {"NVIDIA H200"}


@pytest.mark.slow
def test_the_cpu_plan_judges_every_program(tmp_path):
    plan = load_plan(REPO / "benchmarks" / "plans" / "cpu.toml")
    plan = dataclasses.replace(plan, results=str(tmp_path / "cpu.jsonl"))
    rows = run_plan(plan)
    assert {(r["suite"], r["problem"]) for r in rows} == {k[:2] for k in planned_keys(plan)}
    assert all(r["status"] for r in rows)
    print(json.dumps(summary(rows)))


def test_the_gpu_plan_loads_and_filters_on_a_machine_without_or_tools():
    """A GPU host runs stored programs and never synthesizes: listing the GPU plan's problems
    and running the synthesis filters on its stored programs must not import OR-Tools (it is
    not installed there)."""
    import subprocess
    import sys

    code = (
        "import builtins, sys\n"
        "real = builtins.__import__\n"
        "def block(name, *a, **k):\n"
        "    if name.split('.')[0] == 'ortools':\n"
        "        raise ModuleNotFoundError(\"No module named 'ortools'\")\n"
        "    return real(name, *a, **k)\n"
        "builtins.__import__ = block\n"
        "from drtriton.bench.plan import load_plan, plan_problems\n"
        "plan = load_plan(sys.argv[1])\n"
        "found = [p for r in plan.runs for p in plan_problems(r, cost=False)]\n"
        "from drtriton.synth import check_program\n"
        "stored = next(p.problem.record for p in found if p.problem.record is not None)\n"
        "check_program(stored, 'meta', 'cpu')\n"
        "print(len(found))\n"
        "assert 'ortools' not in sys.modules\n"
    )
    done = subprocess.run([sys.executable, "-c", code, str(REPO / "benchmarks/plans/gpu.toml")],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert int(done.stdout.split()[-1]) >= 60


def test_the_floor_is_the_slower_of_compute_and_memory():
    from drtriton.bench.floor import floor_ms

    rates = {"fp32_tflops": 50.0, "copy_gbs": 4000.0}
    compute_bound = {"flops": 2 * 4096**3, "min_bytes": 3 * 4096**2 * 4}
    memory_bound = {"flops": 10**6, "min_bytes": 4 * 10**9}
    assert floor_ms(compute_bound, rates) == pytest.approx(2 * 4096**3 / 50e12 * 1e3)
    assert floor_ms(memory_bound, rates) == pytest.approx(1.0)
    assert floor_ms({}, rates) is None and floor_ms(compute_bound, {}) is None


def test_rates_are_measured_by_running_the_probes():
    """On the CPU only the plumbing: the FMA kernel runs (interpreted) and both rates are
    positive; the numbers mean something on a GPU only, where the plan measures them."""
    from drtriton.bench.floor import copy_gbs, fma_tflops

    assert fma_tflops("cpu", elements=512, iters=2, repeats=1) > 0
    assert copy_gbs("cpu", nbytes=1 << 20, repeats=1) > 0


def test_a_job_that_raises_is_reported_and_retried_and_the_others_are_kept(tmp_path, monkeypatch):
    import drtriton.bench.run as bench_run

    plan = load_plan(_plan(tmp_path, f'device = "cpu"\n[[runs]]\nsuite = "real"\n'
                           f'folder = "{REAL}"\nscale = "cpu"\n'
                           'only = ["gpt2_mlp_up", "llama_rmsnorm"]\n'))

    def solve(problem, config, pool, fragment_pool=None):
        if problem.id == "llama_rmsnorm":
            raise RuntimeError("harness broke")
        return {"status": "correct"}

    monkeypatch.setattr(bench_run, "solve_problem", solve)
    warnings = []
    with pytest.raises(PlanError, match="1 of 2 rows.*llama_rmsnorm strict: RuntimeError"):
        run_plan(plan, on_warning=warnings.append, unsafe_no_sandbox=True)
    assert [r["problem"] for r in read_rows(plan.results_path())] == ["gpt2_mlp_up"]
    assert "harness broke" in warnings[0]
    monkeypatch.setattr(bench_run, "solve_problem", lambda p, *a, **k: {"status": "correct"})
    rows = run_plan(plan, unsafe_no_sandbox=True)
    assert sorted(r["problem"] for r in rows) == ["gpt2_mlp_up", "llama_rmsnorm"]
    assert len(read_rows(plan.results_path())) == 2  # only the failed row was judged again


def test_an_interrupt_stops_the_plan_at_once_keeping_finished_rows(tmp_path, monkeypatch):
    import threading
    import time

    import drtriton.bench.run as bench_run

    plan = load_plan(_plan(tmp_path, f'device = "cpu"\n[[runs]]\nsuite = "real"\n'
                           f'folder = "{REAL}"\nscale = "cpu"\n'
                           'only = ["gpt2_mlp_up", "llama_rmsnorm", "llama_gate_silu"]\n'))
    release = threading.Event()

    def solve(problem, config, pool, fragment_pool=None):
        if problem.id != "gpt2_mlp_up":
            release.wait(60)  # a long judging still running when the user presses Ctrl-C
        return {"status": "correct"}

    def on_row(row, total):
        raise KeyboardInterrupt

    monkeypatch.setattr(bench_run, "solve_problem", solve)
    started = time.perf_counter()
    try:
        with pytest.raises(KeyboardInterrupt):
            run_plan(plan, on_row, unsafe_no_sandbox=True)
        assert time.perf_counter() - started < 20  # not held until the running jobs end
        assert [r["problem"] for r in read_rows(plan.results_path())] == ["gpt2_mlp_up"]
    finally:
        release.set()


def test_the_summary_reports_the_median_time_over_the_floor_of_correct_rows():
    def row(status, runtime_ms, floor_ms):
        return {"suite": "s", "mode": "strict", "preset": "hardened", "status": status,
                "runtime_ms": runtime_ms, "floor_ms": floor_ms}
    rows = [row("correct", 2.0, 1.0), row("correct", 8.0, 2.0), row("correct", 9.0, None),
            row("incorrect", 100.0, 1.0)]
    assert summary(rows)[0]["median_x_floor"] == pytest.approx(3.0)  # median of 2 and 4
    assert summary(rows[2:])[0]["median_x_floor"] is None


def test_faster_than_compile_counts_the_problems_torch_compile_could_time():
    def row(status, eager, compiled):
        return {"suite": "s", "mode": "hybrid", "preset": "hardened", "status": status,
                "speedup_eager": eager, "speedup_compile": compiled}
    rows = [row("correct", 2.0, 1.5), row("correct", 0.5, 0.4), row("correct", 1.2, None),
            row("incorrect", None, None)]
    line = summary(rows)[0]
    assert line["faster_than_eager"] == pytest.approx(2 / 4)
    assert line["faster_than_compile"] == pytest.approx(1 / 3)  # the uncompiled one left out
    assert line["no_compile_ratio"] == 1


def test_modes_are_judged_in_the_plans_order(tmp_path, monkeypatch):
    """Strict first where the plan lists it first: a hybrid convert then finds its strict
    compile's tuning measured (one TuningCache entry per program)."""
    import drtriton.bench.run as bench_run

    plan = load_plan(_plan(tmp_path, f'device = "cpu"\n[[runs]]\nsuite = "real"\n'
                           f'folder = "{REAL}"\nscale = "cpu"\nonly = ["llama_rmsnorm"]\n'
                           'modes = ["strict", "hybrid"]\n'))
    order = []

    def solve(problem, config, pool, fragment_pool=None):
        order.append(config.mode)
        return {"status": "correct"}

    monkeypatch.setattr(bench_run, "solve_problem", solve)
    run_plan(plan, unsafe_no_sandbox=True)
    assert order == ["strict", "hybrid"]


def test_remote_prepare_without_a_venv_is_one_line(tmp_path):
    import os
    import subprocess

    script = Path(__file__).resolve().parents[1] / "benchmarks" / "remote_prepare.sh"
    missing = tmp_path / "no-python"
    done = subprocess.run(["bash", str(script)], capture_output=True, text=True, check=False,
                          env={**os.environ, "PY": str(missing)})
    assert done.returncode == 2
    assert done.stdout.strip() == f"remote_prepare.sh: no {missing} (run make venv first)"
