"""Benchmark plans: which suites, modes and presets one command runs, at HEAD.

A plan is a TOML file (``benchmarks/plans/*.toml``)::

    name = "gpu"
    results = "benchmarks/results/plans/gpu.jsonl"   # one long-format file per plan
    device = "auto"
    timeout_s = 300

    [[runs]]
    suite = "real"                        # a hand-written suite folder ...
    folder = "benchmarks/suites/real"
    scale = "gpu"                         # gpu: published sizes; cpu: the CPU-size variants
    modes = ["strict", "hybrid"]
    presets = ["hardened"]

    [[runs]]
    suite = "synthetic"                   # ... or held-out synthetic programs
    programs = "benchmarks/programs/synthetic_gpu_heldout.jsonl"
    levels = [1, 2, 5, 20]
    num = 10

``run_plan`` judges every (run, problem, mode, preset) not yet in the results file at this
source tree on this kind of device (rows are keyed by suite, problem, mode, preset, policy, the
source digest and the device, and carry machine, versions, commit and date), over every judge
slot of the machine (each GPU's), appending each row as it finishes: a run cut short resumes.
``latest_complete`` picks, for the report, the newest source tree and device at which every
planned row exists.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field
from pathlib import Path

import tomllib

from drtriton.bench.floor import floor_ms
from drtriton.bench.metrics import fast_p, geomean_speedup
from drtriton.bench.problems import HELD_OUT_SEED, BenchConfig, Problem, synthetic_problems
from drtriton.bench.results import REPO, machine_record
from drtriton.bench.rows import load_rows
from drtriton.judge.config import MODES, PRESETS

_RUN_KEYS = {"suite", "folder", "scale", "programs", "levels", "num", "only", "modes", "presets",
             "search", "policy"}
_PLAN_KEYS = {"name", "about", "results", "device", "timeout_s", "runs"}


class PlanError(ValueError):
    """A plan file that cannot be run (the message names the file and the problem)."""


@dataclass(frozen=True)
class PlanRun:
    """One suite of a plan, judged in each of ``modes`` under each of ``presets``."""

    suite: str  # the rows' suite name
    folder: str | None = None  # hand-written suites: the folder holding suite.json
    scale: str = "gpu"
    programs: str | None = None  # synthetic: a stored JSONL (else synthesized, held-out seed)
    levels: tuple[int, ...] = (1, 2, 5, 20)
    num: int = 10
    only: tuple[str, ...] = ()  # problem names to keep (all when empty)
    modes: tuple[str, ...] = ("strict",)
    presets: tuple[str, ...] = ("hardened",)
    search: bool = False
    policy: str = "compiler"


@dataclass(frozen=True)
class Plan:
    name: str
    results: str
    runs: tuple[PlanRun, ...]
    device: str = "auto"
    timeout_s: float = 300.0
    about: str = ""
    path: str = ""

    def results_path(self) -> Path:
        path = Path(self.results)
        return path if path.is_absolute() else REPO / path


def _check_keys(where: str, table: dict, allowed: set[str]) -> None:
    unknown = sorted(set(table) - allowed)
    if unknown:
        allowed_keys = ", ".join(sorted(allowed))
        raise PlanError(f"{where}: unknown key {unknown[0]!r} (allowed: {allowed_keys})")


def _plan_run(where: str, table: dict) -> PlanRun:
    _check_keys(where, table, _RUN_KEYS)
    if "suite" not in table:
        raise PlanError(f"{where}: needs suite")
    tuples = {k: tuple(v) for k, v in table.items() if k in ("levels", "only", "modes", "presets")}
    run = PlanRun(**{**table, **tuples})
    if not run.folder and not run.programs and run.suite != "synthetic":
        raise PlanError(f"{where}: suite {run.suite!r} needs a folder (hand-written programs) "
                        "or programs (synthetic JSONL)")
    if run.scale not in ("gpu", "cpu"):
        raise PlanError(f"{where}: scale must be gpu or cpu, got {run.scale!r}")
    for mode in run.modes:
        if mode not in MODES:
            raise PlanError(f"{where}: mode must be one of {', '.join(MODES)}, got {mode!r}")
    for preset in run.presets:
        if preset not in PRESETS:
            raise PlanError(f"{where}: preset must be one of {', '.join(PRESETS)}, got {preset!r}")
    return run


def load_plan(path: str | Path) -> Plan:
    """Read and check a plan; raises ``PlanError`` with a one-line message."""
    path = Path(path)
    try:
        data = tomllib.loads(path.read_text())
    except OSError as exc:
        raise PlanError(f"cannot read plan {path}: {exc.strerror or exc}") from exc
    except tomllib.TOMLDecodeError as exc:
        raise PlanError(f"{path}: not valid TOML: {exc}") from exc
    _check_keys(str(path), data, _PLAN_KEYS)
    for key in ("name", "results", "runs"):
        if key not in data:
            raise PlanError(f"{path}: needs {key}")
    runs = tuple(_plan_run(f"{path} runs[{i}]", t) for i, t in enumerate(data["runs"]))
    if not runs:
        raise PlanError(f"{path}: no runs")
    fields = {k: v for k, v in data.items() if k != "runs"}
    return Plan(**fields, runs=runs, path=str(path))


# ---- problems ------------------------------------------------------------------------------
@dataclass(frozen=True)
class PlanProblem:
    suite: str
    problem: Problem
    family: str = ""
    cost: dict = field(default_factory=dict)  # flops, min_bytes (published size)


def _folder(run: PlanRun) -> Path:
    folder = Path(run.folder or "")
    return folder if folder.is_absolute() else REPO / folder


def _kept(run: PlanRun, names: list[str]) -> set[str]:
    """The names ``run.only`` keeps (all when empty); raises for one the suite lacks."""
    missing = sorted(set(run.only) - set(names))
    if missing:
        raise PlanError(f"suite {run.suite}: no problem {missing[0]!r}")
    return set(run.only or names)


def plan_problems(run: PlanRun, cost: bool = True) -> list[PlanProblem]:
    """The problems of one run, in suite order (restricted to ``only`` when given); ``cost``:
    with each hand-written program's FLOPs and minimum bytes at its published size."""
    from drtriton.bench.suites import load_suite, program_cost, program_source

    if not run.folder:  # synthetic: stored or synthesized under the held-out seed
        config = BenchConfig(levels=run.levels, num=run.num, scale=run.scale, seed=HELD_OUT_SEED,
                             programs=str(REPO / run.programs) if run.programs else None)
        found = synthetic_problems(config)
        kept = _kept(run, [p.id for p in found])
        return [PlanProblem(run.suite, p, f"level{p.level}") for p in found if p.id in kept]
    folder = _folder(run)
    programs = load_suite(folder)
    kept = _kept(run, [p.name for p in programs])
    return [PlanProblem(run.suite, Problem(p.name, 0, program_source(folder, p, run.scale)),
                        p.family, program_cost(program_source(folder, p, "gpu")) if cost else {})
            for p in programs if p.name in kept]


# ---- running -------------------------------------------------------------------------------
def row_key(row: dict) -> tuple:
    return (row["suite"], row["problem"], row["mode"], row["preset"], row["policy"],
            bool(row.get("search")), row.get("scale", "gpu"))


def _key(run: PlanRun, item: PlanProblem, mode: str, preset: str) -> tuple:
    return (item.suite, item.problem.id, mode, preset, run.policy, run.search, run.scale)


def read_rows(path: Path) -> list[dict]:
    """The rows of a results file (a truncated last row, left by a killed run, is left out)."""
    return load_rows(path)[0]


def _stamp() -> dict:
    machine = machine_record()
    return {"commit": machine["git_commit"], "source_sha": machine["source_sha"],
            "device": machine["gpu"] or machine["host_cpu"], "torch": machine["torch"],
            "triton": machine["triton"], "date": machine["date"]}


def _rates(device: str) -> dict:
    """The machine's fp32 FMA rate and copy bandwidth, measured once per run before any row
    (a GPU only: the floor means nothing under the Triton interpreter)."""
    from drtriton.devices import device_kind, resolve_device

    device = resolve_device(device)
    if device_kind(device) != "cuda":
        return {}
    from drtriton.bench.floor import measure_rates

    return measure_rates(device)


def _plan_row(item: PlanProblem, run: PlanRun, mode: str, preset: str, solved: dict,
              stamp: dict) -> dict:
    keep = ("status", "reason", "oracle_err", "reference_oracle_err", "runtime_ms", "eager_ms",
            "compile_ms", "speedup_eager", "speedup_compile", "suspicious", "chosen", "wall_s",
            "policy_s", "tuned_kernels", "tuning_error", "hybrid_choice", "hybrid_choice_ms",
            "tuning_cached")
    row = {"suite": item.suite, "problem": item.problem.id, "family": item.family,
           "level": item.problem.level, "mode": mode, "preset": preset, "policy": run.policy,
           "search": run.search, "scale": run.scale, **{k: solved.get(k) for k in keep},
           **item.cost, **stamp}
    row["phase_s"] = {k.removeprefix("judge_").removesuffix("_s"): v for k, v in solved.items()
                      if k.startswith("judge_")}
    floor = floor_ms(item.cost, stamp)
    row["floor_ms"] = round(floor, 6) if floor else None
    return row


def run_plan(plan: Plan, on_row: Callable[[dict, int], None] | None = None,
             unsafe_no_sandbox: bool = False,
             on_warning: Callable[[str], None] | None = None) -> list[dict]:
    """Judge every planned row not yet in the results file at this source tree; return all
    rows of this tree (new and resumed). ``on_warning`` hears of a truncated last row that a
    killed run left (it is dropped, and judged again)."""
    from drtriton.judge import JudgeConfig

    path = plan.results_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    stamp = {**_stamp(), **_rates(plan.device)}
    stored, warning = load_rows(path, repair=True)
    if warning and on_warning is not None:
        on_warning(warning)
    done = {row_key(r): r for r in stored if _run_of(r) == _run_of(stamp)}
    work = [(run, item, mode, preset) for run in plan.runs for item in plan_problems(run)
            for mode in run.modes for preset in run.presets]
    total = len(work)
    rows = [done[_key(*w)] for w in work if _key(*w) in done]
    for row in rows:
        if on_row is not None:
            on_row(row, total)
    todo = [w for w in work if _key(*w) not in done]
    failed: list[str] = []
    with path.open("a") as results:
        # One pool per judge setting: its reference runs are shared by its rows, and baselines
        # are cached on disk across settings. Settings run in the plan's order: with strict
        # first, a hybrid convert finds its strict compile's tuning already measured.
        for mode, preset in dict.fromkeys((w[2], w[3]) for w in todo):
            judge = JudgeConfig(mode=mode, preset=preset, device=plan.device,
                                timeout_s=plan.timeout_s, unsafe_no_sandbox=unsafe_no_sandbox)
            batch = [w for w in todo if (w[2], w[3]) == (mode, preset)]
            for row in _judge_batch(plan, judge, batch, stamp):
                if "plan_error" in row:  # not written: a rerun judges it again
                    failed.append(row["plan_error"])
                    if on_warning is not None:
                        on_warning(row["plan_error"])
                    continue
                results.write(json.dumps(row) + "\n")
                results.flush()  # a killed run keeps every finished row
                rows.append(row)
                if on_row is not None:
                    on_row(row, total)
    if failed:
        raise PlanError(f"{len(failed)} of {total} rows could not be judged (not recorded; a rerun "
                        f"retries them), the first: {failed[0]}")
    return rows


def _judge_batch(plan: Plan, judge, batch: list, stamp: dict):
    """Rows of ``batch`` as they finish, every judge slot busy (each GPU's sandboxes). A job
    that raises yields ``{"plan_error": ...}`` and the others go on. On an interrupt the queued
    jobs are dropped and the pool's sandboxes killed at once (not waited for)."""
    import contextlib

    from drtriton.bench.run import solve_problem
    from drtriton.judge import JudgePool

    def solve(job) -> dict:
        run, item, mode, preset = job
        config = BenchConfig(policy=run.policy, mode=mode, preset=preset, search=run.search,
                             device=plan.device, timeout_s=plan.timeout_s,
                             unsafe_no_sandbox=judge.unsafe_no_sandbox)
        started = time.perf_counter()
        try:
            solved = solve_problem(item.problem, config, pool, fragment_pool)
        except Exception as exc:  # a harness fault, not the candidate's: reported, not a row
            where = f"{item.suite}/{item.problem.id} {mode}"
            return {"plan_error": f"{where}: {type(exc).__name__}: {exc}"[:400]}
        solved.setdefault("wall_s", round(time.perf_counter() - started, 3))
        return _plan_row(item, run, mode, preset, solved, stamp)

    with contextlib.ExitStack() as stack:
        pool = stack.enter_context(JudgePool(judge))
        fragment_pool = None
        if any(run.search for run, *_ in batch):
            from drtriton.search import fragment_judge_config

            fragment_pool = stack.enter_context(JudgePool(fragment_judge_config(judge)))
        executor = ThreadPoolExecutor(pool.size)
        try:
            for future in as_completed([executor.submit(solve, job) for job in batch]):
                yield future.result()
        finally:  # normal end: every job is done; an interrupt: drop the queue, kill the pools
            executor.shutdown(wait=False, cancel_futures=True)


# ---- reporting -----------------------------------------------------------------------------
def planned_keys(plan: Plan) -> set[tuple]:
    """Every row key the plan asks for (problems listed without judging anything)."""
    return {_key(run, item, mode, preset) for run in plan.runs
            for item in plan_problems(run, cost=False)
            for mode in run.modes for preset in run.presets}


def _run_of(row: dict) -> tuple[str, str]:
    """Rows of one run of a plan: one source tree on one kind of device (an H100's rows never
    complete an H200's run)."""
    return row.get("source_sha", ""), row.get("device", "")


def latest_complete(rows: list[dict], keys: set[tuple]) -> list[dict]:
    """The rows of the newest run (source tree and device) in which every planned key was
    judged ([] if none)."""
    by_tree: dict[tuple[str, str], dict[tuple, dict]] = {}
    order: dict[tuple[str, str], str] = {}
    for row in rows:
        tree = _run_of(row)
        by_tree.setdefault(tree, {})[row_key(row)] = row
        order[tree] = max(order.get(tree, ""), row.get("date", ""))
    for tree in sorted(by_tree, key=lambda t: order[t], reverse=True):
        if keys <= set(by_tree[tree]):
            return [by_tree[tree][k] for k in sorted(keys)]
    return []


def summary(rows: list[dict]) -> list[dict]:
    """Per (suite, mode, preset): problems, correct, fraction faster than eager (of all
    problems) and than torch.compile (of the problems it could time: ``no_compile_ratio``
    counts the correct ones it could not), geometric means over the correct ones, and the
    median runtime over the physical floor."""
    groups: dict[tuple, list[dict]] = {}
    for row in rows:
        groups.setdefault((row["suite"], row["mode"], row["preset"]), []).append(row)
    out = []
    for (suite, mode, preset), group in sorted(groups.items()):
        compiled = [r for r in group
                    if r["status"] != "correct" or r.get("speedup_compile") is not None]
        out.append({"suite": suite, "mode": mode, "preset": preset, "problems": len(group),
                    "correct": sum(r["status"] == "correct" for r in group),
                    "faster_than_eager": fast_p(group, "speedup_eager", 1.0),  # None untimed
                    "faster_than_compile": fast_p(compiled, "speedup_compile", 1.0),
                    "no_compile_ratio": (len(group) - len(compiled)  # None untimed
                                         if any(r.get("speedup_eager") for r in group) else None),
                    "geomean_eager": geomean_speedup(group, "speedup_eager"),
                    "geomean_compile": geomean_speedup(group, "speedup_compile"),
                    "median_x_floor": median_floor_ratio(group)})
    return out


def median_floor_ratio(rows: list[dict]) -> float | None:
    """Median over the correct rows with a known floor of runtime / physical floor (None if
    none has one): 1.0 would be the machine's limit."""
    ratios = sorted(r["runtime_ms"] / r["floor_ms"] for r in rows
                    if r["status"] == "correct" and r.get("floor_ms") and r.get("runtime_ms"))
    if not ratios:
        return None
    mid = len(ratios) // 2
    return ratios[mid] if len(ratios) % 2 else (ratios[mid - 1] + ratios[mid]) / 2
