"""GPU benchmark of the built-in compiler over a fixed sample of synthetic programs.

    # once, on a CPU machine with ortools (the sample is committed):
    .venv/bin/python benchmarks/bench_compiler.py --make-sample --per-level 20
    # on the GPU machine:
    PYTHONPATH=src python3 benchmarks/bench_compiler.py [--modes strict,hybrid] [--limit N]

For every program of benchmarks/programs/compiler_gpu_sample.jsonl (GPU-scale levels 1, 2 and 5)
and each mode: compile (device cuda), verify and time with the judge, record correctness, the
speedups over eager and ``torch.compile``. Writes benchmarks/results/compiler_gpu.csv and
benchmarks/results/compiler_gpu.md (summary per level and mode: correctness rate, fraction faster
than eager / torch.compile, geometric-mean speedups, programs slower than 0.5x eager).
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import sys
import time
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent
SAMPLE = ROOT / "programs" / "compiler_gpu_sample.jsonl"
RESULTS = ROOT / "results"
FIELDS = ["id", "level", "index", "ops", "mode", "status", "reason", "kernels", "runtime_ms",
          "eager_ms", "compile_ms", "speedup_eager", "speedup_compile", "compile_s"]


def make_sample(per_level: int, seed: int) -> None:
    from drtriton.compiler import CompilerConfig, UnsupportedOperatorError, compile_program
    from drtriton.synth import SynthConfig, synthesize

    SAMPLE.parent.mkdir(parents=True, exist_ok=True)
    with SAMPLE.open("w") as f:
        for level in (1, 2, 5):
            programs = synthesize(SynthConfig(level=level, num=per_level, seed=seed, scale="gpu",
                                              check="meta"))
            for p in programs:
                try:  # record (do not drop) programs the compiler rejects
                    compile_program(p.source, CompilerConfig(device="cuda"))
                except UnsupportedOperatorError as exc:
                    print(f"level {level} #{p.index}: {exc}", file=sys.stderr)
                f.write(json.dumps({"id": p.id, "level": level, "index": p.index, "ops": p.ops,
                                    "source": p.source}) + "\n")
            print(f"level {level}: {len(programs)} programs", flush=True)


def geomean(xs: list[float]) -> float | None:
    xs = [x for x in xs if x and x > 0]
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else None


def run(modes: list[str], limit: int | None) -> list[dict]:
    from drtriton.compiler import CompilerConfig, UnsupportedOperatorError, compile_program
    from drtriton.judge import JudgeConfig, JudgePool

    records = [json.loads(line) for line in SAMPLE.read_text().splitlines() if line.strip()]
    if limit:
        by_level = defaultdict(list)
        for r in records:
            by_level[r["level"]].append(r)
        records = [r for rs in by_level.values() for r in rs[:limit]]
    rows = []
    for mode in modes:
        with JudgePool(JudgeConfig(mode=mode, device="cuda"), workers=1) as pool:
            for r in records:
                row = {"id": r["id"], "level": r["level"], "index": r["index"],
                       "ops": " ".join(r["ops"]), "mode": mode}
                t = time.perf_counter()
                try:
                    cand = compile_program(r["source"], CompilerConfig(mode=mode, device="cuda"))
                except UnsupportedOperatorError as exc:
                    rows.append({**row, "status": "unsupported", "reason": str(exc)})
                    continue
                row["compile_s"] = round(time.perf_counter() - t, 3)
                row["kernels"] = cand.count("@triton.jit")
                v = pool.verify(r["source"], cand)
                row.update(status=v.status, reason=v.reason[:200], runtime_ms=v.runtime_ms,
                           eager_ms=v.eager_ms, compile_ms=v.compile_ms,
                           speedup_eager=v.speedup_eager, speedup_compile=v.speedup_compile)
                rows.append(row)
                print(f"[{mode}] L{r['level']} #{r['index']} {v.status} "
                      f"eager x{v.speedup_eager or 0:.2f} compile x{v.speedup_compile or 0:.2f}",
                      flush=True)
    return rows


def summarise(rows: list[dict]) -> str:
    lines = ["| level | mode | correct | faster than eager | faster than torch.compile | "
             "geomean vs eager | geomean vs torch.compile | < 0.5x eager |",
             "|---|---|---|---|---|---|---|---|"]
    groups = defaultdict(list)
    for r in rows:
        groups[(r["level"], r["mode"])].append(r)
    slow = []
    for (level, mode), rs in sorted(groups.items()):
        ok = [r for r in rs if r["status"] == "correct"]
        se = [r["speedup_eager"] for r in ok if r.get("speedup_eager")]
        sc = [r["speedup_compile"] for r in ok if r.get("speedup_compile")]
        ge, gc = geomean(se), geomean(sc)
        below = [r for r in ok if r.get("speedup_eager") and r["speedup_eager"] < 0.5]
        slow += below
        lines.append(
            f"| {level} | {mode} | {len(ok)}/{len(rs)} | {sum(x > 1 for x in se)}/{len(ok)} | "
            f"{sum(x > 1 for x in sc)}/{len(ok)} | {f'{ge:.2f}x' if ge else '-'} | "
            f"{f'{gc:.2f}x' if gc else '-'} | {len(below)} |")
    if slow:
        lines += ["", "Programs below 0.5x eager (reason to be recorded):", ""]
        lines += [f"- L{r['level']} #{r['index']} ({r['mode']}): {r['speedup_eager']:.2f}x, "
                  f"ops {r['ops']}" for r in slow]
    failed = [r for r in rows if r["status"] != "correct"]
    if failed:
        lines += ["", "Not verified:", ""]
        lines += [f"- L{r['level']} #{r['index']} ({r['mode']}): {r['status']}: {r.get('reason', '')}"
                  for r in failed]
    return "\n".join(lines) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--make-sample", action="store_true")
    ap.add_argument("--per-level", type=int, default=20)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--modes", default="strict,hybrid")
    ap.add_argument("--limit", type=int, default=None, help="programs per level (default: all)")
    args = ap.parse_args()
    if args.make_sample:
        make_sample(args.per_level, args.seed)
        return
    rows = run(args.modes.split(","), args.limit)
    RESULTS.mkdir(parents=True, exist_ok=True)
    with (RESULTS / "compiler_gpu.csv").open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=FIELDS, extrasaction="ignore")
        w.writeheader()
        w.writerows(rows)
    table = summarise(rows)
    (RESULTS / "compiler_gpu.md").write_text(table)
    print(table)


if __name__ == "__main__":
    main()
