"""Regenerate the README's benchmark tables from the result files in benchmarks/results/.

.venv/bin/python benchmarks/report.py
"""

from __future__ import annotations

import json
from pathlib import Path

from drtriton.bench import markdown_table, replace_block

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"


def synth_block() -> str | None:
    path = RESULTS / "synth_rate.json"
    if not path.exists():
        return None
    data = json.loads(path.read_text())
    m = data["machine"]
    table = markdown_table(
        data["rows"],
        [
            "level",
            "scale",
            "check",
            "programs",
            "programs_per_cpu_s",
            "programs_per_s",
            "draws_per_program",
            "frac_in_flop_band",
            "rejected",
        ],
    )
    return (
        f"{table}\n\n"
        f"_{m['host_cpu']}, one worker, torch {m['torch']}, ortools {m['ortools']}, "
        f"commit {m['git_commit']}, {m['date']}; generated from `benchmarks/results/synth_rate.json`._"
    )


def gpu_compiler_block() -> str | None:
    """Per-problem rows of the H200 runs of `drtriton bench` (benchmarks/gpu_session.sh)."""
    rows = []
    for mode in ("strict", "hybrid"):
        path = RESULTS / "gpu" / f"{mode}.json.rows.jsonl"
        if path.exists():
            rows += [
                json.loads(line) | {"mode": mode} for line in path.read_text().splitlines() if line
            ]
    if not rows:
        return None

    def fmt(x):
        return "-" if x is None else f"{x:.2f}"

    table = markdown_table(
        [
            {
                "mode": r["mode"],
                "problem": r["id"].rsplit("-", 1)[0],
                "ops": r["ops"],
                "status": r["status"],
                "runtime_ms": fmt(r["runtime_ms"]),
                "eager_ms": fmt(r["eager_ms"]),
                "vs_eager": fmt(r["speedup_eager"]),
                "vs_compile": fmt(r["speedup_compile"]),
            }
            for r in rows
        ],
        ["mode", "problem", "ops", "status", "runtime_ms", "eager_ms", "vs_eager", "vs_compile"],
    )
    return (
        f"{table}\n\n_NVIDIA H200, torch 2.11.0+cu130, triton 3.6.0, judge preset hardened (fp32), "
        "2026-11-30; rows from `benchmarks/results/gpu/*.rows.jsonl`. A partial run: the device time "
        "of the session ran out after these problems._"
    )


def main() -> None:
    readme = ROOT / "README.md"
    text = readme.read_text()
    for name, block in [("synth", synth_block()), ("gpu_compiler", gpu_compiler_block())]:
        if block is not None:
            text = replace_block(text, name, block)
    readme.write_text(text)
    print("README.md tables updated")


if __name__ == "__main__":
    main()
