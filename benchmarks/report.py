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


def main() -> None:
    readme = ROOT / "README.md"
    text = readme.read_text()
    for name, block in [("synth", synth_block())]:
        if block is not None:
            text = replace_block(text, name, block)
    readme.write_text(text)
    print("README.md tables updated")


if __name__ == "__main__":
    main()
