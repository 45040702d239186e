"""Regenerate the benchmark tables of the README and docs/ from benchmarks/results/.

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
        f"commit {m['git_commit']}, {m['date']}; "
        "generated from `benchmarks/results/synth_rate.json`._"
    )


def _fmt(x) -> str:
    return "-" if x is None else (f"{x:.2f}" if isinstance(x, float) else str(x))


VERDICT_TARGETS = {  # the judge issue's targets, per kind of measurement
    "cold_median_s": ("gpu", 20.0), "warm_median_s": ("gpu", 4.0),
    "warm_store_median_s": ("gpu", 4.0),
    "group_median_s": ("gpu", 30.0), "small_warm_median_s": ("gpu", 1.5),
    "warm_beyond_forward_median_s": ("cpu", 0.5),
}


def verdict_cost_block() -> str | None:
    """Medians of benchmarks/bench_verdict_cost.py runs, against the targets, one row each."""
    rows, notes = [], []
    for name in ("h200", "cpu"):
        path = RESULTS / "verdict_cost" / f"{name}.json"
        if not path.exists():
            continue
        data = json.loads(path.read_text())
        env = data["environment"]
        for key, (scale, target) in VERDICT_TARGETS.items():
            value = data.get(key)
            if env.get("scale") != scale or value is None:
                continue
            met = "yes" if value <= target else "no"
            rows.append({"measure": key.removesuffix("_median_s"), "machine": name,
                         "median_s": value, "target_s": target, "met": met})
        notes.append(f"{name}: {data['programs']} programs, {env.get('gpu', 'CPU')}, torch "
                     f"{env['torch']}, triton {env['triton']}, commit {env['commit']}, "
                     f"{env['date']}")
    if not rows:
        return None
    table = markdown_table(rows, ["measure", "machine", "median_s", "target_s", "met"])
    return (f"{table}\n\n_" + "; ".join(notes)
            + "; generated from `benchmarks/results/verdict_cost/`._")


PLANS = ROOT / "benchmarks" / "plans"


def plan_block(name: str, suites: tuple[str, ...] = ()) -> str:
    """The latest complete run of ``benchmarks/plans/NAME.toml``: one row per suite, mode and
    preset, a plot of the speedups beside the results, and where it ran. ``suites``: only
    these suites' rows, without the plot (which shows the whole plan)."""
    from drtriton.bench.plan import latest_complete, load_plan, planned_keys, read_rows, summary

    plan = load_plan(PLANS / f"{name}.toml")
    rows = latest_complete(read_rows(plan.results_path()), planned_keys(plan))
    rows = [r for r in rows if not suites or r["suite"] in suites]
    where = f"`{plan.results_path().relative_to(ROOT)}`"
    if not rows:
        return f"_No complete run of `benchmarks/plans/{name}.toml` yet (results: {where})._"
    table = [{k: _fmt(v) for k, v in r.items()} for r in summary(rows)]
    picture = ""
    if not suites and any(r.get("speedup_eager") for r in rows):
        plot = RESULTS / "plans" / f"{name}.png"  # plans may share a results file
        _plan_plot(rows, plot)
        picture = f"\n\n![speedups]({plot.relative_to(ROOT)})"
    first = min(rows, key=lambda r: r["date"])
    return (markdown_table(table, list(table[0])) + picture
            + f"\n\n_{first['device']}, torch {first['torch']}, triton {first['triton']}, commit "
            f"{first['commit']}, {first['date'][:10]}; generated from {where}._")


def plan_rows_block(name: str) -> str | None:
    """Per-program rows of the latest complete run of a plan of heavy ops: time against the
    vendor library (eager) and torch.compile, throughput, and the error against the float64
    oracle as a multiple of the fp32 reference's own."""
    from drtriton.bench.plan import latest_complete, load_plan, planned_keys, read_rows

    plan = load_plan(PLANS / f"{name}.toml")
    rows = latest_complete(read_rows(plan.results_path()), planned_keys(plan))
    if not rows:
        return None
    table = []
    for r in rows:
        ok = r["status"] == "correct"
        err = r.get("oracle_err")
        ref = r.get("reference_oracle_err")
        table.append({
            "problem": r["problem"], "family": r.get("family", ""), "status": r["status"],
            "runtime_ms": _fmt(r.get("runtime_ms")), "eager_ms": _fmt(r.get("eager_ms")),
            "vs_eager": _fmt(r.get("speedup_eager")), "vs_compile": _fmt(r.get("speedup_compile")),
            "tflops": _fmt(r["flops"] / r["runtime_ms"] / 1e9) if ok and r.get("flops") else "-",
            "eager_tflops": (_fmt(r["flops"] / r["eager_ms"] / 1e9)
                             if r.get("eager_ms") and r.get("flops") else "-"),
            "err_over_ref": _fmt(err / ref) if err is not None and ref else "-",
            "x_floor": (_fmt(r["runtime_ms"] / r["floor_ms"])
                        if ok and r.get("floor_ms") and r.get("runtime_ms") else "-")})
    first = min(rows, key=lambda r: r["date"])
    where = f"`{plan.results_path().relative_to(ROOT)}`"
    return (markdown_table(table, list(table[0]))
            + f"\n\n_{first['device']}, torch {first['torch']}, triton {first['triton']}, commit "
            f"{first['commit']}, {first['date'][:10]}; generated from {where}._")


def plan_problems_block(name: str) -> str | None:
    """Per-program rows of the latest complete run of a plan: status, times against eager and
    torch.compile, time over the physical floor, and why a program failed."""
    from drtriton.bench.plan import latest_complete, load_plan, planned_keys, read_rows

    plan = load_plan(PLANS / f"{name}.toml")
    rows = latest_complete(read_rows(plan.results_path()), planned_keys(plan))
    if not rows:
        return None
    table = []
    for r in sorted(rows, key=lambda r: (r["suite"], r["problem"], r["mode"])):
        ok = r["status"] == "correct"
        table.append({
            "suite": r["suite"], "problem": r["problem"], "mode": r["mode"], "status": r["status"],
            "runtime_ms": _fmt(r.get("runtime_ms")), "eager_ms": _fmt(r.get("eager_ms")),
            "compile_ms": _fmt(r.get("compile_ms")), "vs_eager": _fmt(r.get("speedup_eager")),
            "vs_compile": _fmt(r.get("speedup_compile")),
            "x_floor": (_fmt(r["runtime_ms"] / r["floor_ms"])
                        if ok and r.get("floor_ms") and r.get("runtime_ms") else "-"),
            "why": "" if ok else " ".join(str(r.get("reason") or "").split())[:100]})
    first = min(rows, key=lambda r: r["date"])
    where = f"`{plan.results_path().relative_to(ROOT)}`"
    return (markdown_table(table, list(table[0]))
            + f"\n\n_{first['device']}, torch {first['torch']}, triton {first['triton']}, commit "
            f"{first['commit']}, {first['date'][:10]}; generated from {where}._")


def _plan_plot(rows: list[dict], path: Path) -> None:
    """Per suite and mode, of the correct rows: speedups against eager and torch.compile, and
    runtime over the physical floor."""
    plt = _pyplot()
    groups = sorted({(r["suite"], r["mode"]) for r in rows})
    ok = [r for r in rows if r["status"] == "correct"]
    panels = {
        "vs eager": lambda r: r.get("speedup_eager"),
        "vs torch.compile": lambda r: r.get("speedup_compile"),
        "runtime / physical floor": lambda r: (r["runtime_ms"] / r["floor_ms"]
                                               if r.get("floor_ms") and r.get("runtime_ms")
                                               else None),
    }
    series = {title: {g: [v for r in ok if (r["suite"], r["mode"]) == g and (v := value(r))]
                      for g in groups} for title, value in panels.items()}
    series = {t: {g: d for g, d in by.items() if d} for t, by in series.items()}
    series = {t: by for t, by in series.items() if by}  # the floor is known for some suites
    fig, axes = plt.subplots(1, len(series), figsize=(4.7 * len(series), 3.8), squeeze=False)
    for ax, (title, by) in zip(axes[0], series.items(), strict=True):
        ax.boxplot(list(by.values()), tick_labels=[f"{s}\n{m}" for s, m in by])
        ax.tick_params(axis="x", labelsize=7)
        ax.set_yscale("log")
        ax.axhline(1.0, color="grey", lw=0.8)
        ax.set_title(title)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


STAGE_LABELS = {"untrained": "untrained", "sft": "SFT", "drpo": "DRPO", "grpo": "GRPO",
                "drpo_search": "DRPO + search"}


def learning_block() -> str | None:
    """The learning experiment's held-out results (``benchmarks/results/learning/summary.json``,
    written by ``drtriton learn``): per level and stage, accuracy, mean speedup of the correct
    answers and n; bar charts of both and, once RL has run, its curves, beside the summary."""
    path = RESULTS / "learning" / "summary.json"
    if not path.exists():
        return None
    data = json.loads(path.read_text())
    table = learning_rows(data)
    if not table:
        return None
    plot = path.with_name("learning.png")
    _learning_plot(data, plot)
    env = data["environment"]
    return (markdown_table(table, list(table[0])) + f"\n\n![learning]({plot.relative_to(ROOT)})"
            + f"\n\n_{env.get('gpu') or env.get('host_cpu')}, torch {env['torch']}, commit "
            f"{env['git_commit']}, {env['date'][:10]}, plan `{data['plan']}`; generated from "
            f"`{path.relative_to(ROOT)}`._")


def learning_rows(data: dict) -> list[dict]:
    """One row per level and stage that was evaluated (n > 0), in the summary's order."""
    return [{"level": level, "stage": STAGE_LABELS.get(stage, stage),
             "accuracy": _fmt(cell["accuracy"]),
             "mean_speedup_correct": _fmt(cell["mean_speedup_correct"]), "n": cell["n"]}
            for level, stages in data["levels"].items()
            for stage, cell in stages.items() if cell["n"]]


def _learning_plot(data: dict, path: Path) -> None:
    """Bars per level and stage (accuracy; mean speedup of correct answers) and, where RL ran,
    the fraction of correct answers per step of each objective."""
    plt = _pyplot()
    levels = list(data["levels"])
    stages = [s for s in STAGE_LABELS if any(data["levels"][lv].get(s, {}).get("n")
                                              for lv in levels)]
    curves = {k: v["correct_rate"] for k, v in data.get("rl_step_costs_s", {}).items()
              if v.get("correct_rate")}
    panels = 2 + bool(curves)
    fig, axes = plt.subplots(1, panels, figsize=(4.7 * panels, 3.6), squeeze=False)
    width = 0.8 / max(1, len(stages))
    for ax, key, title in zip(axes[0], ("accuracy", "mean_speedup_correct"),
                              ("held-out accuracy", "mean speedup of correct (vs eager)"),
                              strict=False):
        for i, stage in enumerate(stages):
            values = [data["levels"][lv].get(stage, {}).get(key) or 0.0 for lv in levels]
            ax.bar([j + i * width for j in range(len(levels))], values, width,
                   label=STAGE_LABELS[stage])
        ax.set_xticks([j + width * (len(stages) - 1) / 2 for j in range(len(levels))],
                      [f"level {lv}" for lv in levels])
        ax.set_title(title)
    axes[0][0].set_ylim(0, 1)
    axes[0][0].legend(fontsize=7)
    if curves:
        ax = axes[0][2]
        for objective, rates in curves.items():
            ax.plot(range(1, len(rates) + 1), rates, label=objective.upper())
        ax.set_xlabel("RL step")
        ax.set_title("correct answers per step (training)")
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _pyplot():
    try:
        import matplotlib
    except ImportError:
        raise SystemExit("report.py: plotting needs matplotlib: pip install -e '.[plot]'") from None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def main() -> None:
    # The README holds one table per suite; the other plans and per-problem rows live in the
    # docs of their stage.
    blocks = {
        "README.md": [("plan_real_strict", lambda: plan_block("real_strict")),
                      ("plan_heavy", lambda: plan_block("heavy")),
                      ("plan_half", lambda: plan_block("half")),
                      ("plan_synthetic", lambda: plan_block("synthetic_strict")),
                      ("learning", learning_block)],
        "docs/bench.md": [("plan_gpu", lambda: plan_block("gpu")),
                          ("plan_real_tf32", lambda: plan_block("real_tf32")),
                          ("plan_heavy_tf32", lambda: plan_block("heavy_tf32")),
                          ("plan_cpu", lambda: plan_block("cpu"))],
        "docs/judge.md": [("verdict_cost", verdict_cost_block)],
        "docs/synthesis.md": [("synth", synth_block)],
        "docs/compiler.md": [("plan_gpu_rows", lambda: plan_problems_block("real_strict")),
                             ("plan_heavy_rows", lambda: plan_rows_block("heavy")),
                             ("plan_heavy_tf32_rows", lambda: plan_rows_block("heavy_tf32"))],
    }
    for name, makers in blocks.items():
        path = ROOT / name
        text = path.read_text()
        for block_name, make in makers:
            block = make()
            if block is not None:
                text = replace_block(text, block_name, block)
        path.write_text(text)
        print(f"{name} tables updated")


if __name__ == "__main__":
    main()
