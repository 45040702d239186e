"""Provenance and README tables: where a benchmark ran, and how its numbers reach the README.

Every result file records the machine, library versions, git commit and date next to the numbers,
and README tables are generated from those files (``python benchmarks/report.py``), never typed.
"""

from __future__ import annotations

import csv
import datetime
import json
import os
import platform
import re
import subprocess
from collections.abc import Sequence
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1]  # src/drtriton
REPO = Path(__file__).resolve().parents[3]


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

    package = PACKAGE
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
        "git_commit": _git_commit(root or REPO),
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
