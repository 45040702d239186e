"""Appended JSONL row files (a benchmark's ``OUT.rows.jsonl``, a plan's results file), read back
for a rerun whatever a killed run left at their end."""

from __future__ import annotations

import json
from pathlib import Path


def load_rows(path: Path, repair: bool = False) -> tuple[list[dict], str | None]:
    """The rows of ``path`` ([] when it does not exist) and a warning, or None.

    Rows are appended one line at a time, so a run killed while writing leaves at most its last
    line cut short: that line is dropped with a warning, and with ``repair`` cut off the file, so
    that the next row appended starts a line of its own. Any other line that is not a JSON object
    is a ``ValueError`` naming the file and line: finished rows are never dropped silently."""
    if not path.exists():
        return [], None
    lines = path.read_bytes().splitlines(keepends=True)
    last = max((n for n, raw in enumerate(lines, 1) if raw.strip()), default=0)
    rows: list[dict] = []
    for number, raw in enumerate(lines[:last], 1):
        row = _row(raw) if raw.strip() else {}
        if row is None and number < last:
            raise ValueError(f"{path}:{number}: not a JSON row; fix or remove that line")
        if row is None:
            if repair:
                _cut(path, sum(len(x) for x in lines[:number - 1]))
            return rows, f"{path}:{number}: dropped a truncated last row (its run was cut short)"
        if row:
            rows.append(row)
    if repair and lines and not lines[-1].endswith(b"\n"):
        with path.open("ab") as f:  # a complete last row that lacks only its newline
            f.write(b"\n")
    return rows, None


def _row(raw: bytes) -> dict | None:
    try:
        row = json.loads(raw)
    except ValueError:
        return None
    return row if isinstance(row, dict) else None


def _cut(path: Path, size: int) -> None:
    with path.open("r+b") as f:
        f.truncate(size)
