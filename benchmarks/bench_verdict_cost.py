"""What a verdict costs: cold (nothing of ours cached), warm (reference and baselines cached),
warm with the candidate's kernels in the judge's kernel store, a group of candidates of one
program, and small programs on a warm pool.

    python benchmarks/bench_verdict_cost.py --scale gpu --out benchmarks/results/verdict_cost/h200
    python benchmarks/bench_verdict_cost.py --scale cpu --out benchmarks/results/verdict_cost/cpu

Reads the declarative plan ``benchmarks/plans/verdict_cost.json``: the programs (real-model
blocks at their published sizes; ``cpu`` gives the small sizes the CPU run substitutes), the
group programs and the small pairs. Candidates are the built-in compiler's strict output,
compiled (and, on a GPU, tuned) in the judge's sandbox. The kernel store starts empty; each
row's ``cache_hits`` says what it found cached (``candidate:kernels``: the store's binaries).
Every verdict is a row of ``OUT.rows.jsonl`` (resumable: rows already there are kept) with its
whole record, phase split included; ``OUT.json`` holds the medians with machine, versions,
commit and date, ``OUT.csv`` one line per row.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))


def environment(scale: str) -> dict:
    from drtriton.provenance import machine_record

    machine = machine_record(REPO)
    record = {"scale": scale, "machine": platform.node(), "cpu_count": machine["cpu_count"],
              "python": machine["python"], "torch": machine["torch"],
              "triton": machine["triton"], "commit": machine["git_commit"],
              "date": machine["date"]}
    if machine["gpu"]:
        record["gpu"] = machine["gpu"]
    return record


def row_of(kind: str, name: str, verdict, extra: dict | None = None) -> dict:
    return {
        "kind": kind,
        "program": name,
        "status": verdict.status,
        "reason": verdict.reason[:300],
        "wall_s": round(verdict.wall_s, 3),
        "phase_s": verdict.phase_s,
        "cache_hits": verdict.cache_hits,
        "kernels": verdict.kernels,
        "runtime_ms": verdict.runtime_ms,
        "eager_ms": verdict.eager_ms,
        "compile_ms": verdict.compile_ms,
        "timed_calls": verdict.timed_calls,
        **(extra or {}),
    }


def run(args: argparse.Namespace) -> list[dict]:
    from drtriton.bench.suites import sized_source
    from drtriton.compiler.convert import compile_sandboxed
    from drtriton.judge import JudgeConfig, JudgePool
    from drtriton.program import ProgramError

    plan = json.loads(Path(args.plan).read_text())
    rows_path = Path(f"{args.out}.rows.jsonl")
    rows_path.parent.mkdir(parents=True, exist_ok=True)
    done = [json.loads(x) for x in rows_path.read_text().splitlines()] if rows_path.exists() else []
    seen = {(r["kind"], r["program"]) for r in done}
    device = "cuda" if args.scale == "gpu" else "cpu"
    cache = tempfile.mkdtemp(prefix="verdict-cost-")
    config = JudgeConfig(
        device=device,
        seed=args.seed,
        timeout_s=args.timeout_s,
        baseline_cache=os.path.join(cache, "baselines.sqlite"),  # ours starts empty
        kernel_store=os.path.join(cache, "kernels"),
        jobs_per_gpu=plan["group_size"],
        memory_limit_gb=args.memory_limit_gb,
    )
    t0 = time.monotonic()
    rows_file = rows_path.open("a")

    def keep(row: dict) -> None:
        row["environment"] = env
        done.append(row)
        rows_file.write(json.dumps(row) + "\n")
        rows_file.flush()
        print(f"{row['kind']:<6} {row['program']:<30} {row['status']:<10} {row['wall_s']:>8.2f} s "
              f"{json.dumps(row['phase_s'])}", flush=True)

    env = environment(args.scale)
    start = time.monotonic()
    with JudgePool(config, workers=1 if device == "cpu" else None) as pool:
        keep({"kind": "pool", "program": "-", "status": "started", "wall_s":
              round(time.monotonic() - start, 3), "phase_s": {}, "servers": pool.size})
        for entry in plan["programs"]:
            name = Path(entry["file"]).stem
            if args.only and name not in args.only:
                continue
            if time.monotonic() - t0 > args.budget_s:
                print(f"budget spent: {name} and later programs not run", flush=True)
                break
            source = (REPO / entry["file"]).read_text()
            if args.scale == "cpu":
                source = sized_source(source, entry["cpu"])
            if ("cold", name) in seen and ("warm", name) in seen and (
                ("warm_store", name) in seen or device == "cpu") and (
                name not in plan["group_programs"] or ("group", name) in seen
            ):
                continue
            started = time.monotonic()
            try:
                result = compile_sandboxed(pool, source, "strict", device)
            except ProgramError as exc:
                result = {"error": str(exc)}
            compile_s = round(time.monotonic() - started, 3)
            if "error" in result:
                keep({"kind": "compile", "program": name, "status": "error", "wall_s": compile_s,
                      "phase_s": {}, "reason": result["error"][:300]})
                continue
            candidate = result["candidate"]
            cold = pool.verify(source, candidate)
            keep(row_of("cold", name, cold, {"compile_candidate_s": compile_s,
                                             "tuning": result.get("tuning"),
                                             "tuning_error": result.get("tuning_error"),
                                             "autotuned": "@triton.autotune(" in candidate}))
            warm = pool.verify(source, candidate)
            keep(row_of("warm", name, warm))
            if pool.kernels is not None:
                pool.kernels.wait(300)
                stored = pool.verify(source, candidate)
                keep(row_of("warm_store", name, stored, {"store": dict(pool.kernels.counts)}))
            if name in plan["group_programs"]:
                group = [candidate + f"\n# answer {k}\n" for k in range(plan["group_size"])]
                started = time.monotonic()
                verdicts = pool.verify_group(source, group, seed=args.seed + 7)
                wall = round(time.monotonic() - started, 3)
                statuses = sorted({v.status for v in verdicts})
                keep({"kind": "group", "program": name, "status": ",".join(statuses),
                      "wall_s": wall, "phase_s": {}, "size": len(group),
                      "kernel_hits": sum(map(_kernel_hits, map(vars, verdicts))),
                      "verdict_wall_s": [round(v.wall_s, 3) for v in verdicts]})
        for ref_path, cand_path in plan["small_pairs"]:
            name = Path(cand_path).stem
            if ("small", name) in seen:
                continue
            ref, cand = (REPO / ref_path).read_text(), (REPO / cand_path).read_text()
            pool.verify(ref, cand)  # warms the pool and our caches for this pair
            if pool.kernels is not None:
                pool.kernels.wait(120)
            verdict = pool.verify(ref, cand)
            keep(row_of("small", name, verdict))
    rows_file.close()
    return done


def summarise(rows: list[dict], out: str) -> dict:
    def med(kind: str, key: str = "wall_s") -> float | None:
        values = [r[key] for r in rows if r["kind"] == kind and r.get("status") != "error"]
        return round(statistics.median(values), 3) if values else None

    def overhead(r: dict) -> float:  # beyond the candidate child's whole run
        return r["wall_s"] - r["phase_s"].get("candidate", 0.0)

    def beyond_forward(r: dict) -> float:  # beyond the candidate's own calls (trials, timing)
        own = r["phase_s"].get("candidate/forward", 0.0)
        own += r["phase_s"].get("candidate_timing/timed calls", 0.0)
        return r["wall_s"] - own

    def med_where(kind: str, keep) -> float | None:
        values = [r["wall_s"] for r in rows if r["kind"] == kind and r.get("status") != "error"
                  and keep(r)]
        return round(statistics.median(values), 3) if values else None

    warm = [r for r in rows if r["kind"] == "warm"]
    summary = {
        "environment": next((r["environment"] for r in rows if "environment" in r), {}),
        "programs": len({r["program"] for r in rows if r["kind"] == "cold"}),
        "cold_median_s": med("cold"),
        "warm_median_s": med("warm"),
        "warm_compiling_median_s": med_where("warm", lambda r: not _kernel_hits(r)),
        "warm_store_median_s": med("warm_store"),
        "group_median_s": med("group"),
        "small_warm_median_s": med("small"),
        "warm_overhead_median_s": (
            round(statistics.median(map(overhead, warm)), 3) if warm else None
        ),
        "warm_beyond_forward_median_s": (
            round(statistics.median(map(beyond_forward, warm)), 3) if warm else None
        ),
        "statuses": sorted({f"{r['kind']}:{r['status']}" for r in rows}),
    }
    Path(f"{out}.json").write_text(json.dumps(summary, indent=1) + "\n")
    with open(f"{out}.csv", "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["kind", "program", "status", "wall_s", "phases"])
        for r in rows:
            writer.writerow([r["kind"], r["program"], r["status"], r["wall_s"],
                             json.dumps(r.get("phase_s", {}))])
    return summary


def _kernel_hits(row: dict) -> bool:
    return any(h.endswith(":kernels") for h in row.get("cache_hits") or [])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--plan", default=str(REPO / "benchmarks/plans/verdict_cost.json"))
    parser.add_argument("--scale", choices=("gpu", "cpu"), required=True)
    parser.add_argument("--out", required=True, help="path prefix of the result files")
    parser.add_argument("--only", nargs="*", help="program names (file stems) to run")
    parser.add_argument("--seed", type=int, default=11)
    parser.add_argument("--timeout-s", type=float, default=300.0)
    parser.add_argument("--memory-limit-gb", type=float, default=48.0)
    parser.add_argument("--budget-s", type=float, default=1e9, help="start no program after this")
    args = parser.parse_args()
    rows = run(args)
    summary = summarise(rows, args.out)
    print(json.dumps({k: v for k, v in summary.items() if k != "environment"}, indent=1))


if __name__ == "__main__":
    main()
