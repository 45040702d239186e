"""The adversarial suite: candidate files with their expected verdicts, and legit candidates.

A case file declares ``EXPECTED = "status"`` (or ``{"cpu": ..., "cuda": ...}``) and optionally
``REFERENCE = "ref_file.py"`` (default ``ref_add_relu.py`` in the references directory). Case files
are read with ``ast`` only: they are untrusted and never imported here.

    PYTHONPATH=src python3 -m drtriton.judge.suite --device cpu
"""

from __future__ import annotations

import argparse
import ast
import json
import time
from dataclasses import dataclass
from pathlib import Path

from drtriton.judge.config import JudgeConfig
from drtriton.judge.pool import JudgePool
from drtriton.program import parse_python

REPO = Path(__file__).resolve().parents[3]
ADVERSARIAL_DIR = REPO / "tests" / "adversarial"
CASES_DIR = REPO / "tests" / "judge_cases"
DEFAULT_REFERENCE = "ref_add_relu.py"


@dataclass(frozen=True)
class Case:
    name: str
    path: Path
    reference: Path
    expected: str


def _constant(tree: ast.Module, name: str) -> object:
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == name for t in node.targets
        ):
            return ast.literal_eval(node.value)
    return None


def load_cases(
    device: str, adversarial: Path = ADVERSARIAL_DIR, cases: Path = CASES_DIR
) -> list[Case]:
    """Adversarial cases then legit candidates (``legit_*.py``, expected ``correct``)."""
    out = []
    for path in sorted(adversarial.glob("*.py")) + sorted(cases.glob("legit_*.py")):
        text = path.read_text()
        try:
            tree = parse_python(text)
        except SyntaxError:  # a syntax-error case states its expectation in a comment-free way
            tree = parse_python("\n".join(ln for ln in text.splitlines() if ln.startswith("EXPECTED")))
        expected = _constant(tree, "EXPECTED") or "correct"
        if isinstance(expected, dict):
            expected = expected["cuda" if device.startswith("cuda") else "cpu"]
        reference = _constant(tree, "REFERENCE") or DEFAULT_REFERENCE
        out.append(Case(path.stem, path, cases / reference, expected))
    return out


def run_suite(
    config: JudgeConfig, workers: int | None = None, only: list[str] | None = None
) -> list[dict]:
    """Judge every case; one row per case with expected, got and whether they match."""
    device = config.resolved_device()
    cases = [c for c in load_cases(device) if not only or c.name in only]
    pairs = [(c.reference.read_text(), c.path.read_text()) for c in cases]
    t0 = time.monotonic()
    with JudgePool(config, workers) as pool:
        verdicts = pool.verify_many(pairs)
    rows = []
    for case, verdict in zip(cases, verdicts, strict=True):
        rows.append(
            {
                "case": case.name,
                "expected": case.expected,
                "got": verdict.status,
                "ok": verdict.status == case.expected,
                "reason": verdict.reason[:200],
                "wall_s": round(verdict.wall_s, 3),
                "verdict": verdict.to_dict(),
            }
        )
    rows.append({"total_wall_s": time.monotonic() - t0})
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="auto")
    parser.add_argument("--timeout-s", type=float, default=20.0)
    parser.add_argument("--workers", type=int, default=None)
    # a low cap makes the memory-hog case fail fast, well inside its wall-clock limit
    parser.add_argument("--memory-limit-gb", type=float, default=2.0)
    parser.add_argument("--only", nargs="*")
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    config = JudgeConfig(
        device=args.device, timeout_s=args.timeout_s, memory_limit_gb=args.memory_limit_gb
    )
    rows = run_suite(config, args.workers, args.only)
    for row in rows[:-1]:
        mark = "ok  " if row["ok"] else "FAIL"
        print(
            f"{mark} {row['case']:<24} expected={row['expected']:<14} got={row['got']:<14} {row['reason'][:90]}"
        )
    print(
        f"{sum(r['ok'] for r in rows[:-1])}/{len(rows) - 1} as expected in {rows[-1]['total_wall_s']:.1f} s"
    )
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
