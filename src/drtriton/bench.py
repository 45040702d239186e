"""Benchmark bookkeeping shared by the scripts in ``benchmarks/``.

Every result file records the machine, library versions, git commit and date next to the numbers,
and README tables are generated from those files (``python benchmarks/report.py``), never typed.
"""

from __future__ import annotations

import contextlib
import csv
import dataclasses
import datetime
import json
import math
import os
import platform
import re
import subprocess
import threading
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass
from pathlib import Path


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _git(root: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=root, capture_output=True, text=True).stdout.strip()


def _git_commit(root: Path) -> str | None:
    """HEAD's short hash, marked -dirty when tracked files differ from it.

    ``DRTRITON_COMMIT`` overrides it: a copy of the tree on another machine (the lent GPU) can
    carry a stale ``.git``, which stamped rows with a commit that did not run.
    """
    if os.environ.get("DRTRITON_COMMIT"):
        return os.environ["DRTRITON_COMMIT"]
    try:
        commit = _git(root, "rev-parse", "--short", "HEAD")
        dirty = _git(root, "status", "--porcelain", "-uno")
    except OSError:
        return None
    return (commit + "-dirty" if dirty else commit) or None


def source_digest() -> str:
    """First 12 hex digits of a SHA-256 over the package's source files: what actually ran."""
    import hashlib

    package = Path(__file__).resolve().parent
    digest = hashlib.sha256()
    for path in sorted(package.rglob("*.py")):
        digest.update(str(path.relative_to(package)).encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()[:12]


def machine_record(root: Path | None = None) -> dict:
    """Where and with what a benchmark ran."""
    import torch

    record = {
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "host_cpu": _cpu_model(),
        "cpu_count": os.cpu_count(),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "gpu": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None,
        "git_commit": _git_commit(root or Path(__file__).resolve().parents[2]),
        "source_sha": source_digest(),
    }
    for name in ("triton", "ortools"):
        try:
            record[name] = __import__(name).__version__
        except Exception:  # a missing optional library is recorded as absent
            record[name] = None
    return record


def write_results(path: Path, rows: Sequence[dict], meta: dict) -> None:
    """``path``.json holds meta + rows; ``path``.csv the rows alone."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.with_suffix(".json").write_text(
        json.dumps({"machine": meta, "rows": list(rows)}, indent=2) + "\n"
    )
    with path.with_suffix(".csv").open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)


def markdown_table(rows: Sequence[dict], columns: Sequence[str]) -> str:
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    lines += ["| " + " | ".join(str(r[c]) for c in columns) + " |" for r in rows]
    return "\n".join(lines)


def replace_block(text: str, name: str, body: str) -> str:
    """Replace the text between ``<!-- bench:NAME -->`` and ``<!-- /bench:NAME -->``."""
    pattern = re.compile(rf"(<!-- bench:{name} -->\n).*?(<!-- /bench:{name} -->)", re.S)
    if not pattern.search(text):
        raise ValueError(f"README has no <!-- bench:{name} --> block")
    return pattern.sub(lambda m: m.group(1) + body + "\n" + m.group(2), text)


# ============================================================================ the benchmark suite
# Synthetic suites use this seed, which training never uses (``drtriton.train`` refuses it), so
# benchmark programs are held out by construction.
HELD_OUT_SEED = 1_000_003
FAST_P = (0.0, 1.0, 1.5, 2.0)


@dataclass(frozen=True)
class Problem:
    id: str
    level: int
    source: str
    ops: tuple[str, ...] = ()
    record: object = None  # the SynthProgram of a synthetic problem


@dataclass(frozen=True)
class BenchConfig:
    """One benchmark run: which problems, which policy, which judge settings."""

    suite: str = "synthetic"  # synthetic | kernelbench
    levels: tuple[int, ...] = (1, 2, 5, 20)
    num: int = 10  # programs per level (synthetic) or at most this many per level (kernelbench)
    scale: str = "small"
    seed: int = HELD_OUT_SEED
    programs: str | None = None  # a synthesized JSONL to use instead of synthesizing here
    path: str | None = None  # KernelBench checkout (suite kernelbench)
    policy: str = "compiler"  # compiler | hf:MODEL_DIR | openai:BASE_URL#MODEL
    samples: int = 1  # answers per fragment from an LLM policy when searching (pass@1 otherwise)
    search: bool = False
    mode: str = "strict"
    preset: str = "hardened"
    device: str = "auto"
    max_fragment_ops: int = 4
    search_wall_s: float = 600.0  # per problem: no new fragment is tried after this
    # SQLite verdict cache of the search; None: OUT.search.sqlite beside the report, so a run cut
    # short mid-search resumes without judging its fragments again
    search_cache: str | None = None
    timeout_s: float = 300.0
    # host-memory cap per candidate process; GPU-scale inputs (up to 16 GB) pass through the host
    memory_limit_gb: float | None = None  # None: 8 on a CPU, 64 on a GPU
    # rows of the same problems judged in the other mode (compiler policy, no search): where the
    # compiler writes the same kernels in both modes, a correct verdict there is reused here
    reuse_rows: str | None = None

    def memory_limit(self, device: str) -> float:
        return self.memory_limit_gb or (64.0 if device.startswith("cuda") else 8.0)


def sample_indices(level: int, num: int, seed: int) -> list[int]:
    """Program indices of a benchmark sample: spread over the sweeps at levels 1 and 2 (the
    first indices of a sweep would all start with the same operator), consecutive above."""
    import random

    from drtriton.ops import OPS

    if level == 1:
        return (
            sorted({k * len(OPS) // num for k in range(num)})
            if num < len(OPS)
            else list(range(num))
        )
    if level == 2:
        pairs = len(OPS) ** 2
        return sorted(random.Random(f"bench:{seed}").sample(range(pairs), min(num, pairs)))
    return list(range(num))


def synthetic_problems(config: BenchConfig) -> list[Problem]:
    """Held-out synthetic programs: from ``config.programs`` or synthesized now."""
    from drtriton.synth import SynthConfig, read_jsonl, synthesize_one

    if config.programs:
        stored = read_jsonl(config.programs)
        records = [
            p
            for level in config.levels
            for p in [q for q in stored if q.level == level][: config.num]
        ]
    else:
        records = []
        for level in config.levels:
            synth = SynthConfig(level=level, num=1, seed=config.seed, scale=config.scale)
            indices = sample_indices(level, config.num, config.seed)
            records += [synthesize_one(synth, i).program for i in indices]
    return [
        Problem(f"L{p.level}-{p.index}-{p.id}", p.level, p.source, tuple(p.ops), p) for p in records
    ]


def kernelbench_problems(
    path: str | Path, levels: Sequence[int], limit: int | None = None
) -> list[Problem]:
    """Problems of a KernelBench checkout (``KernelBench/level{N}/{i}_{name}.py``), numeric order.

    ``path`` may be the checkout's root, its ``KernelBench`` folder or a level folder. The project
    ships no KernelBench data: evaluation only.
    """
    root = Path(path)
    problems = []
    for level in levels:
        folder = next(
            (
                d
                for d in (root / "KernelBench" / f"level{level}", root / f"level{level}", root)
                if d.is_dir() and any(d.glob("*.py"))
            ),
            None,
        )
        if folder is None:
            raise FileNotFoundError(f"no KernelBench level{level} folder under {root}")
        files = sorted(
            folder.glob("*.py"),
            key=lambda f: (
                int(f.name.split("_")[0]) if f.name.split("_")[0].isdigit() else 1 << 30,
                f.name,
            ),
        )
        for f in files[:limit]:
            problems.append(Problem(f"L{level}-{f.stem}", level, f.read_text()))
    return problems


def fast_p(rows: Sequence[dict], key: str, p: float) -> float | None:
    """KernelBench's fast_p: fraction of ALL problems that are correct and have speedup > p."""
    if not rows:
        return None
    if p > 0 and any(r["status"] == "correct" and r.get(key) is None for r in rows):
        return None  # untimed (CPU): only fast_0 = accuracy is defined
    hits = sum(r["status"] == "correct" and (p == 0 or r[key] > p) for r in rows)
    return hits / len(rows)


def geomean_speedup(rows: Sequence[dict], key: str) -> float | None:
    """Geometric-mean speedup over the correct problems (None when nothing was timed)."""
    values = [r[key] for r in rows if r["status"] == "correct" and r.get(key)]
    if not values:
        return None
    return math.exp(sum(math.log(v) for v in values) / len(values))


def summarize(rows: Sequence[dict]) -> dict:
    """Accuracy, fast_p against eager and torch.compile, geometric means (invalid references,
    which failed the synthesis filters where they were run, are counted but not scored)."""
    excluded = sum(r["status"] == "invalid_reference" for r in rows)
    rows = [r for r in rows if r["status"] != "invalid_reference"]
    out: dict = {
        "excluded_invalid": excluded,
        "problems": len(rows),
        "correct": sum(r["status"] == "correct" for r in rows),
    }
    out["accuracy"] = out["correct"] / len(rows) if rows else None
    for base in ("eager", "compile"):
        key = f"speedup_{base}"
        for p in FAST_P:
            out[f"fast_{p:g}_{base}"] = fast_p(rows, key, p)
        out[f"geomean_{base}"] = geomean_speedup(rows, key)
    if any("whole_status" in r for r in rows):
        out |= search_gain(rows)
    return out


def search_gain(rows: Sequence[dict]) -> dict:
    """What search added over its own best whole-program candidate, judged in the same run:
    the geometric-mean ratio whole time / chosen time where both are correct and timed, and the
    problems only search got right."""
    ratios = [
        r["whole_runtime_ms"] / r["runtime_ms"]
        for r in rows
        if r["status"] == "correct"
        and r.get("whole_status") == "correct"
        and r.get("whole_runtime_ms")
        and r.get("runtime_ms")
    ]
    return {
        "search_gain_geomean": math.exp(sum(map(math.log, ratios)) / len(ratios))
        if ratios
        else None,
        "search_gain_problems": len(ratios),
        "rescued_by_search": sum(
            r["status"] == "correct" and r.get("whole_status") != "correct" for r in rows
        ),
    }


def _row(problem: Problem, verdict, chosen: str, wall_s: float, reason: str = "") -> dict:
    v = verdict.to_dict() if verdict is not None else {}
    return {
        "id": problem.id,
        "level": problem.level,
        "ops": " ".join(problem.ops),
        "status": v.get("status", "no_candidate"),
        "reason": (v.get("reason") or reason)[:300],
        "runtime_ms": v.get("runtime_ms"),
        "eager_ms": v.get("eager_ms"),
        "compile_ms": v.get("compile_ms"),
        "speedup_eager": v.get("speedup_eager"),
        "speedup_compile": v.get("speedup_compile"),
        "suspicious": v.get("suspicious", False),
        "chosen": chosen,
        "wall_s": round(wall_s, 3),
    } | {f"judge_{name}_s": t for name, t in (v.get("phase_s") or {}).items()}


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
    return out


# GPU-scale filter runs hold up to tens of GB on one GPU: one at a time, whatever the threads.
_FILTER_LOCK = threading.Lock()


def _invalid_reference(problem: Problem, device: str) -> str | None:
    """Synthetic programs only shape-checked where they were made are run through the quality
    filters on the GPU first; a program that fails them is excluded from the metrics, and listed."""
    record = problem.record
    if record is None or record.checked == "run" or not device.startswith("cuda"):
        return None
    import torch

    from drtriton.synth import check_program

    with _FILTER_LOCK:
        reason = check_program(record, "run", device)
        torch.cuda.empty_cache()  # the filters' tensors must not crowd the judge's sandboxes
    return f"failed the synthesis filters on {device}: {reason}" if reason else None


def _policy(config: BenchConfig, device: str):
    from drtriton.policy import load_policy

    return load_policy(config.policy, device)


def _body(candidate: str) -> str:
    """A compiler candidate without its first line (the docstring line naming the mode)."""
    return candidate.split("\n", 1)[-1]


def reused_row(problem: Problem, config: BenchConfig, device: str, other: dict | None) -> dict | None:
    """The other mode's row for this problem, when it still holds here: the compiler writes the
    same kernels in both modes (only the docstring's mode differs) and that verdict was correct.
    Only strict to hybrid: a correct strict verdict holds in hybrid mode, which allows more; the
    reverse need not hold, and an incorrect verdict is judged again rather than trusted."""
    from drtriton.compiler import CompilerConfig, compile_program

    if other is None or other.get("status") != "correct":
        return None
    if (other.get("env") or {}).get("mode") != "strict":
        return None
    if config.mode == "strict" or config.policy != "compiler" or config.search:
        return None
    target = "cuda" if device.startswith("cuda") else "cpu"
    try:
        ours = compile_program(problem.source, CompilerConfig(mode=config.mode, device=target))
        theirs = compile_program(problem.source, CompilerConfig(mode="strict", device=target))
    except Exception:  # noqa: BLE001 - judged the ordinary way, which reports the error
        return None
    if _body(ours) != _body(theirs):
        return None
    source = {k: other.get("env", {}).get(k) for k in ("commit", "source_sha", "date", "device")}
    return {k: v for k, v in other.items() if k != "env"} | {
        "verdict_reused_from": {"mode": "strict"} | source,
        "reason": "same kernels as the strict candidate: its correct strict verdict and timings",
    }


def solve_problem(
    problem: Problem, config: BenchConfig, pool, fragment_pool=None, other_mode_row: dict | None = None
) -> dict:
    """Produce a candidate for one problem with the configured policy and judge it."""
    from drtriton.compiler import CompilerConfig, compile_program

    started = time.perf_counter()
    device = pool.config.resolved_device()
    reused = reused_row(problem, config, device, other_mode_row)
    if reused is not None:
        return reused
    invalid = _invalid_reference(problem, device)
    filter_s = round(time.perf_counter() - started, 3)
    if invalid:
        return _row(problem, None, "none", time.perf_counter() - started, invalid) | {
            "status": "invalid_reference"
        }
    if config.search:
        from drtriton.search import SearchConfig, search

        search_config = SearchConfig(
            device=device,
            mode=config.mode,
            preset=config.preset,
            max_fragment_ops=config.max_fragment_ops,
            wall_time_s=config.search_wall_s,
            cache_path=config.search_cache,
        )
        from drtriton.search import compiler_generator, policy_generator

        generators = [compiler_generator(config.mode, device)]
        if config.policy != "compiler":
            generators.append(policy_generator(_policy(config, device), config.samples))
        report = search(
            problem.source, search_config, generators, pool=pool, fragment_pool=fragment_pool
        )
        row = _row(
            problem,
            report.verdict,
            report.chosen,
            time.perf_counter() - started,
            "; ".join(report.notes),
        )
        return row | _search_columns(report)
    try:
        if config.policy == "compiler":
            compiler = CompilerConfig(
                mode=config.mode, device="cuda" if device.startswith("cuda") else "cpu"
            )
            candidate = compile_program(problem.source, compiler)
        else:  # pass@1: the policy's first answer is the one that counts
            from drtriton.policy import Sampling, parse_answer

            answer = _policy(config, device).generate([problem.source], 1, Sampling())[0][0]
            candidate = parse_answer(answer)
    except Exception as exc:  # the policy produced nothing usable: counted as not correct
        return _row(
            problem, None, "none", time.perf_counter() - started, f"{type(exc).__name__}: {exc}"
        )
    policy_s = round(time.perf_counter() - started - filter_s, 3)
    verdict = pool.verify(problem.source, candidate)
    row = _row(problem, verdict, "whole", time.perf_counter() - started)
    return row | {"filter_s": filter_s, "policy_s": policy_s}


def run_bench(config: BenchConfig, out: Path, on_row=None, on_start=None) -> dict:
    """Run (or resume) a benchmark; writes OUT (report JSON), OUT.rows.jsonl, OUT.csv, OUT.png.

    ``on_row(row, total)`` is called as each problem finishes (or is found done), ``on_start(id)``
    as a problem starts."""
    from drtriton.judge import JudgeConfig, JudgePool
    from drtriton.judge.core import environment_record

    if config.suite == "synthetic":
        problems = synthetic_problems(config)
    elif config.suite == "kernelbench":
        if not config.path:
            raise ValueError("the kernelbench suite needs --path to a KernelBench checkout")
        problems = kernelbench_problems(config.path, config.levels, config.num)
    else:
        raise ValueError(f"unknown suite {config.suite!r}; use synthetic or kernelbench")
    rows_path = out.with_name(out.name + ".rows.jsonl")
    if config.search and config.search_cache is None:
        config = dataclasses.replace(config, search_cache=str(out.with_name(out.name + ".search.sqlite")))
    device = JudgeConfig(device=config.device).resolved_device()
    judge_config = JudgeConfig(
        preset=config.preset,
        mode=config.mode,
        device=config.device,
        timeout_s=config.timeout_s,
        memory_limit_gb=config.memory_limit(device),
    )
    stamp = _row_stamp(judge_config)
    done = {}
    if rows_path.exists():  # resume: problems already judged under these judge settings are kept
        rows = (json.loads(line) for line in rows_path.read_text().splitlines() if line)
        done = {r["id"]: r for r in rows if _resumable(r, stamp["env"])}
    todo = [p for p in problems if p.id not in done]
    other_mode = _reusable_rows(config.reuse_rows, stamp["env"])
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
        with ThreadPoolExecutor(max_workers=workers) as executor:
            def solve(problem: Problem) -> dict:
                if on_start is not None:
                    on_start(problem.id)
                return solve_problem(problem, config, pool, fragment_pool, other_mode.get(problem.id))

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


def _reusable_rows(path: str | None, stamp: dict) -> dict[str, dict]:
    """The latest row per problem id of another run's rows file, judged under these settings."""
    if path is None:
        return {}
    if not Path(path).exists():
        raise ValueError(f"--reuse-rows: no such file {path}")
    rows = (json.loads(line) for line in Path(path).read_text().splitlines() if line)
    same_settings = {**stamp, "mode": "strict"}  # the other run's mode, otherwise the same
    return {r["id"]: r for r in rows if _resumable(r, same_settings)}


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
            # the torch.compile baseline is checked to have compiled (before be9caa6 it ran eagerly)
            "compile_baseline": "checked" if judge_config.time_compile else "off",
            "preset": judge_config.preset,
            "precision": judge_config.precision,
            "mode": judge_config.mode,
        }
    }


def write_report(config: BenchConfig, rows: list[dict], out: Path, environment: dict) -> dict:
    levels = sorted({r["level"] for r in rows})
    report = {
        "machine": machine_record(),
        "judge_environment": environment,
        "config": {k: getattr(config, k) for k in config.__dataclass_fields__},
        "summary": {
            f"level{lv}": summarize([r for r in rows if r["level"] == lv]) for lv in levels
        },
        "rows": rows,
    }
    report["summary"]["all"] = summarize(rows)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=2) + "\n")
    if rows:
        with out.with_suffix(".csv").open("w", newline="") as f:
            # rows of one report may differ in columns (search columns, rows resumed from an
            # older run): the header is the union, in first-seen order
            fields = list(dict.fromkeys(k for r in rows for k in r))
            writer = csv.DictWriter(f, fieldnames=fields)
            writer.writeheader()
            writer.writerows(rows)
    plot_speedups(rows, out.with_suffix(".png"))
    return report


def plot_speedups(rows: Sequence[dict], path: Path) -> bool:
    """Histogram of per-problem speedups (log scale) per level; False when nothing was timed."""
    timed = [r for r in rows if r["status"] == "correct" and r.get("speedup_eager")]
    if not timed:
        return False
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.5), sharey=True)
    for ax, base in zip(axes, ("eager", "compile"), strict=True):
        for level in sorted({r["level"] for r in timed}):
            values = [
                math.log2(r[f"speedup_{base}"])
                for r in timed
                if r["level"] == level and r.get(f"speedup_{base}")
            ]
            ax.hist(values, bins=20, alpha=0.5, label=f"level {level}")
        ax.axvline(0, color="k", lw=0.8)
        ax.set_xlabel(f"log2 speedup over {'eager' if base == 'eager' else 'torch.compile'}")
        ax.legend()
    axes[0].set_ylabel("problems")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return True


def summary_table(report: dict) -> str:
    """Markdown table of a report's per-level metrics."""

    def fmt(x):
        return "n/a" if x is None else (f"{x:.2f}" if isinstance(x, float) else str(x))

    cols = ["problems", "accuracy", "fast_1_eager", "fast_1.5_eager", "fast_2_eager", "geomean_eager",
            "fast_1_compile", "geomean_compile"]  # fmt: skip
    rows = [{"level": k, **{c: fmt(v.get(c)) for c in cols}} for k, v in report["summary"].items()]
    return markdown_table(rows, ["level", *cols])
