"""Running a benchmark: a candidate per problem from the policy (or the search), judged, as rows
appended to OUT.rows.jsonl as they finish, so a run cut short resumes where it stopped."""

from __future__ import annotations

import contextlib
import dataclasses
import json
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path
from typing import TYPE_CHECKING

from drtriton.bench.problems import BenchConfig, Problem, kernelbench_problems, synthetic_problems
from drtriton.bench.results import machine_record
from drtriton.bench.rows import load_rows
from drtriton.bench.summary import write_report
from drtriton.devices import device_kind

if TYPE_CHECKING:
    from drtriton.policy import Policy


def _row(problem: Problem, verdict, chosen: str, wall_s: float, reason: str = "") -> dict:
    v = verdict.to_dict() if verdict is not None else {}
    return {
        "id": problem.id,
        "level": problem.level,
        "ops": " ".join(problem.ops),
        "status": v.get("status", "no_candidate"),
        "reason": (v.get("reason") or reason)[:300],
        "oracle_err": v.get("oracle_err"),
        "reference_oracle_err": v.get("reference_oracle_err"),
        "runtime_ms": v.get("runtime_ms"),
        "eager_ms": v.get("eager_ms"),
        "compile_ms": v.get("compile_ms"),
        "speedup_eager": v.get("speedup_eager"),
        "speedup_compile": v.get("speedup_compile"),
        "suspicious": v.get("suspicious", False),
        "chosen": chosen,
        "wall_s": round(wall_s, 3),
    } | {f"judge_{name}_s": t for name, t in (v.get("phase_s") or {}).items()}


def _invalid_row(problem: Problem, exc: Exception, started: float) -> dict:
    """The row of a problem whose own program cannot be run (its inputs cannot be allocated, its
    forward raises, ...): one problem the run reports and goes past, and a rerun skips."""
    row = _row(problem, None, "none", time.perf_counter() - started, str(exc))
    return row | {"status": "invalid_reference"}


def _search_columns(report) -> dict:
    """Both of the search's contestants, judged in the same run: the best whole-program candidate
    and the composition of fragments (the row's own columns are the one chosen)."""
    out = {
        "fragments_tried": report.fragments_tried,
        "candidates_judged": report.candidates_judged,
        "cache_hits": report.cache_hits,
        "segments": len(report.segmentation),
    }
    for name, verdict in (("whole", report.whole_verdict), ("composed", report.composed_verdict)):
        v = verdict.to_dict() if verdict is not None else {}
        out[f"{name}_status"] = v.get("status")
        out[f"{name}_runtime_ms"] = v.get("runtime_ms")
        out[f"{name}_speedup_eager"] = v.get("speedup_eager")
    return out


def _invalid_reference(problem: Problem, device: str) -> str | None:
    """Synthetic programs only shape-checked where they were made are run through the quality
    filters on the GPU first; a program that fails them is excluded from the metrics, and listed."""
    record = problem.record
    if record is None or record.checked == "run" or not device.startswith("cuda"):
        return None
    reason = run_filters(record, device)
    return f"failed the synthesis filters on {device}: {reason}" if reason else None


def run_filters(record, device: str) -> str | None:
    """The synthesis filters on real data, run eagerly in this process under TORCH_STATE_LOCK:
    torch.fx patches torch functions globally while another thread compiles a candidate, and an
    eager run that overlaps it fails (a level-20 reference on the H200 got ``NameError`` in the
    strict run and ``ill_conditioned`` in the hybrid one). The lock also keeps GPU-scale filter
    runs (up to tens of GB on one GPU) one at a time, whatever the threads."""
    import torch

    from drtriton.program import TORCH_STATE_LOCK
    from drtriton.synth import check_program

    with TORCH_STATE_LOCK:
        reason = check_program(record, "run", device)
    torch.cuda.empty_cache()  # the filters' tensors must not crowd the judge's sandboxes
    return reason


def _policy(config: BenchConfig, device: str, precision: str) -> Policy:
    """The policy ``config`` names; the compiler in the judge's mode and ``precision``."""
    from drtriton.policy import Sampling, load_policy

    sampling = Sampling(temperature=config.temperature, max_new_tokens=config.max_new_tokens)
    return load_policy(config.policy, device, config.mode, precision, sampling,
                       config.generation_batch_size)


def solve_problem(
    problem: Problem,
    config: BenchConfig,
    pool,
    fragment_pool=None,
    policy: Policy | None = None,
) -> dict:
    """Produce a candidate for one problem with the configured policy and judge it.

    ``policy`` is the loaded policy ``config.policy`` names (``run_bench`` loads it once for all
    problems); when None it is loaded here. A problem whose own program cannot be run becomes an
    ``invalid_reference`` row with the reason, like any other outcome."""
    from drtriton.program import ProgramError  # the judge's InvalidReferenceError is one

    started = time.perf_counter()
    device = pool.config.resolved_device()
    invalid = _invalid_reference(problem, device)
    filter_s = round(time.perf_counter() - started, 3)
    if invalid:
        return _row(problem, None, "none", time.perf_counter() - started, invalid) | {
            "status": "invalid_reference"
        }
    if config.search:
        policy = policy or _policy(config, device, pool.config.precision)
        return _search_row(problem, config, pool, fragment_pool, policy, started)
    try:  # pass@1: the policy's first candidate is the one that counts
        policy = policy or _policy(config, device, pool.config.precision)
        candidate, notes = policy.first_candidate(problem.source, pool)
    except Exception as exc:  # the policy produced nothing usable: counted as not correct
        return _row(
            problem, None, "none", time.perf_counter() - started, f"{type(exc).__name__}: {exc}"
        )
    policy_s = round(time.perf_counter() - started - filter_s, 3)
    try:
        verdict = pool.verify(problem.source, candidate)
    except ProgramError as exc:
        return _invalid_row(problem, exc, started)
    row = _row(problem, verdict, "whole", time.perf_counter() - started)
    return row | {"filter_s": filter_s, "policy_s": policy_s} | notes


def _search_row(problem: Problem, config: BenchConfig, pool, fragment_pool, policy: Policy,
                started: float) -> dict:
    """The row of a problem solved by the search over the compiler's candidates and, when the
    policy is another, the policy's ``config.samples`` answers per fragment."""
    from drtriton.policy import CompilerPolicy
    from drtriton.program import ProgramError
    from drtriton.search import SearchConfig, search

    device = pool.config.resolved_device()
    search_config = SearchConfig(
        device=device,
        mode=config.mode,
        preset=config.preset,
        max_fragment_ops=config.max_fragment_ops,
        wall_time_s=config.search_wall_s,
        candidates_per_fragment=config.candidates_per_fragment,
        cache_path=config.search_cache,
    )
    compiler = CompilerPolicy(device_kind(device), config.mode, pool.config.precision)
    # the compiler's variants are searched unless the policy is to be measured alone; the
    # compiler as the policy adds nothing (compiling every fragment twice for the same candidates)
    if policy == compiler:
        policies = [compiler]
    else:
        policies = [compiler, policy] if config.search_with_compiler else [policy]
    generators = [p.search_generator(config.samples) for p in policies]
    try:
        report = search(
            problem.source, search_config, generators, pool=pool, fragment_pool=fragment_pool
        )
    except ProgramError as exc:
        return _invalid_row(problem, exc, started)
    row = _row(
        problem,
        report.verdict,
        report.chosen,
        time.perf_counter() - started,
        "; ".join(report.notes),
    )
    return row | _search_columns(report)


def run_bench(config: BenchConfig, out: Path, on_row=None, on_start=None,
              on_warning=None, on_generated=None) -> dict:
    """Run (or resume) a benchmark; writes OUT (report JSON), OUT.rows.jsonl, OUT.csv, OUT.png.

    ``on_row(row, total)`` is called as each problem finishes (or is found done), ``on_start(id)``
    as a problem starts, ``on_warning(message)`` for a rows file that a killed run left with a
    truncated last line (the line is dropped). A local model (``Policy.batches``) answers every
    problem first, in batches, before anything is judged (generation never shares the GPU with
    a timing); ``on_generated(done, total)`` after each batch."""
    from drtriton.judge import JudgeConfig, JudgePool
    from drtriton.judge.pair import environment_record
    from drtriton.policy import Prefetched

    if config.suite == "synthetic":
        problems = synthetic_problems(config)
    elif config.suite == "kernelbench":
        if not config.path:
            raise ValueError("the kernelbench suite needs --path to a KernelBench checkout")
        problems = kernelbench_problems(config.path, config.levels, config.num)
    else:
        raise ValueError(f"unknown suite {config.suite!r}; use synthetic or kernelbench")
    rows_path = out.with_name(out.name + ".rows.jsonl")
    out.parent.mkdir(parents=True, exist_ok=True)  # the report's folder may not exist yet
    if config.search and config.search_cache is None:
        config = dataclasses.replace(
            config, search_cache=str(out.with_name(out.name + ".search.sqlite"))
        )
    device = JudgeConfig(device=config.device).resolved_device()
    judge_config = JudgeConfig(
        preset=config.preset,
        mode=config.mode,
        device=config.device,
        timeout_s=config.timeout_s,
        time_compile=config.compile_baseline,
        timing_budget_s=config.timing_budget_s,
        memory_limit_gb=config.memory_limit(device),
        unsafe_no_sandbox=config.unsafe_no_sandbox,
    )
    stamp = _row_stamp(judge_config)
    # resume: problems already judged under these judge settings are kept
    stored, warning = load_rows(rows_path, repair=True)
    if warning and on_warning is not None:
        on_warning(warning)
    done = {r["id"]: r for r in stored if _resumable(r, stamp["env"])}
    todo = [p for p in problems if p.id not in done]
    with contextlib.ExitStack() as stack:
        pool = stack.enter_context(JudgePool(judge_config)) if todo else None
        fragment_pool = None
        if todo and config.search:
            from drtriton.search import fragment_judge_config

            # fragments are a pre-filter (the composition is judged in full): fewer trials, no
            # torch.compile baseline
            fragment_pool = stack.enter_context(JudgePool(fragment_judge_config(judge_config)))
        rows_file = stack.enter_context(rows_path.open("a"))
        for problem in problems:
            if problem.id in done and on_row is not None:
                on_row(done[problem.id], len(problems))
        # One problem per judge slot at a time (one per GPU): slots are the unit of parallelism.
        workers = pool.size if pool is not None else 1
        # The policy is loaded once (a checkpoint read again for every problem costs its load
        # each time), and a wrong spec or path fails here, before anything is judged.
        policy = _policy(config, device, judge_config.precision) if todo else None
        if policy is not None and policy.batches and not config.search:
            policy = Prefetched(policy, [p.source for p in todo], on_generated)
        with ThreadPoolExecutor(max_workers=workers) as executor:
            def solve(problem: Problem) -> dict:
                if on_start is not None:
                    on_start(problem.id)
                return solve_problem(problem, config, pool, fragment_pool, policy)

            futures = [executor.submit(solve, p) for p in todo]
            for future in as_completed(futures):
                row = future.result() | stamp
                rows_file.write(json.dumps(row) + "\n")
                rows_file.flush()  # a killed run keeps every finished problem
                done[row["id"]] = row
                if on_row is not None:
                    on_row(row, len(problems))
    rows = [done[p.id] for p in problems]
    environment = environment_record(judge_config, judge_config.resolved_device())
    return write_report(config, rows, out, environment)


RESUME_KEYS = ("preset", "precision", "compile_baseline", "mode")


def _resumable(row: dict, stamp: dict) -> bool:
    """A stored row counts on resume only if it was judged under the same judge settings; a row
    from before the torch.compile baseline was fixed (no ``compile_baseline``) is judged again,
    and the new row, appended later in the file, replaces it."""
    env = row.get("env") or {}
    return all(env.get(key) == stamp.get(key) for key in RESUME_KEYS)


def _row_stamp(judge_config) -> dict:
    """Where a row was measured, on the row itself: a run cut short leaves rows but no report."""
    env = machine_record()
    return {
        "env": {
            "device": env["gpu"] or env["host_cpu"],
            "torch": env["torch"],
            "triton": env["triton"],
            "commit": env["git_commit"],
            "source_sha": env["source_sha"],
            "date": env["date"][:10],
            # "checked": the torch.compile baseline is verified to have captured a graph, so
            # rows stamped otherwise may hold an eager time under the compile column
            "compile_baseline": "checked" if judge_config.time_compile else "off",
            "preset": judge_config.preset,
            "precision": judge_config.precision,
            "mode": judge_config.mode,
        }
    }
