"""Copy the verdicts of earlier search caches into one cache (rows already there are kept).

    python benchmarks/merge_caches.py INTO.sqlite FROM.sqlite [FROM.sqlite ...]

A search started again on changed candidates judges only what is new: keys cover the reference,
the candidate, the GPU, the versions and the judge settings, so a verdict is reused only for the
same pair under the same settings. Missing FROM files are skipped.
"""

from __future__ import annotations

import sqlite3
import sys
from pathlib import Path


def merge(into: str, sources: list[str]) -> int:
    """Insert every verdict of ``sources`` missing from ``into``; returns how many were added."""
    db = sqlite3.connect(into)
    db.execute("CREATE TABLE IF NOT EXISTS verdicts (key TEXT PRIMARY KEY, verdict TEXT)")
    before = db.execute("SELECT COUNT(*) FROM verdicts").fetchone()[0]
    for source in sources:
        if Path(source).exists():
            rows = sqlite3.connect(source).execute("SELECT key, verdict FROM verdicts").fetchall()
            db.executemany("INSERT OR IGNORE INTO verdicts VALUES (?, ?)", rows)
    db.commit()
    return db.execute("SELECT COUNT(*) FROM verdicts").fetchone()[0] - before


if __name__ == "__main__":
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    print(f"{sys.argv[1]}: {merge(sys.argv[1], sys.argv[2:])} verdicts added")
