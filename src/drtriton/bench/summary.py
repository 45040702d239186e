"""A benchmark's report: JSON summary, CSV rows, speedup plot, a printable table."""

from __future__ import annotations

import csv
import json
import math
from collections.abc import Sequence
from pathlib import Path

from drtriton.bench.metrics import summarize
from drtriton.bench.problems import BenchConfig
from drtriton.bench.results import machine_record, markdown_table


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

    cols = ["problems", "accuracy", "fast_1_eager", "fast_1.5_eager", "fast_2_eager",
            "geomean_eager", "fast_1_compile", "geomean_compile"]  # fmt: skip
    rows = [{"level": k, **{c: fmt(v.get(c)) for c in cols}} for k, v in report["summary"].items()]
    return markdown_table(rows, ["level", *cols])
