"""Result files and README tables: how a benchmark's numbers reach the README.

Every result file records the machine, library versions, git commit and date next to the numbers
(``drtriton.provenance.machine_record``), and README tables are generated from those files
(``python benchmarks/report.py``), never typed.
"""

from __future__ import annotations

import csv
import json
import re
from collections.abc import Sequence
from pathlib import Path

from drtriton.provenance import REPO, machine_record, source_digest

__all__ = ["REPO", "machine_record", "markdown_table", "source_digest", "write_results"]


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
        raise ValueError(f"no <!-- bench:{name} --> block")
    return pattern.sub(lambda m: m.group(1) + body + "\n" + m.group(2), text)
