"""KernelBench's metrics over benchmark rows: accuracy, fast_p, geometric-mean speedups."""

from __future__ import annotations

from collections.abc import Sequence

from drtriton.stats import geomean

FAST_P = (0.0, 1.0, 1.5, 2.0)


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
    return geomean(values)


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
    """What search added over its own best whole-program candidate, judged in the same search: the
    geometric mean of the chosen program's speedup over eager divided by the whole candidate's,
    where both are correct and timed (each speedup is measured side by side with eager in its own
    verdict; raw times of two verdicts are not comparable), and the problems only search got
    right."""
    ratios = [
        r["speedup_eager"] / r["whole_speedup_eager"]
        for r in rows
        if r["status"] == "correct"
        and r.get("whole_status") == "correct"
        and r.get("whole_speedup_eager")
        and r.get("speedup_eager")
    ]
    return {
        "search_gain_geomean": geomean(ratios),
        "search_gain_problems": len(ratios),
        "rescued_by_search": sum(
            r["status"] == "correct" and r.get("whole_status") != "correct" for r in rows
        ),
    }
