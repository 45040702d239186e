"""The benchmark stage: problems, judged candidates, KernelBench's metrics, reports.

    drtriton bench --suite synthetic --levels 1,2,5,20 --num 10 --out report.json

``problems`` picks what is run (held-out synthetic samples, a KernelBench checkout), ``run`` gets a
candidate per problem and judges it (rows appended as they finish; resumable), ``metrics`` computes
accuracy, fast_p and geometric means, ``report`` writes the JSON/CSV/plot, and ``records`` stamps
every result with its machine and versions and turns result files into README tables.
"""

from drtriton.bench.metrics import FAST_P, fast_p, geomean_speedup, search_gain, summarize
from drtriton.bench.problems import (
    HELD_OUT_SEED,
    BenchConfig,
    Problem,
    kernelbench_problems,
    sample_indices,
    synthetic_problems,
)
from drtriton.bench.results import (
    machine_record,
    markdown_table,
    replace_block,
    source_digest,
    write_results,
)
from drtriton.bench.run import RESUME_KEYS, run_bench, solve_problem
from drtriton.bench.summary import plot_speedups, summary_table, write_report

__all__ = [
    "FAST_P", "HELD_OUT_SEED", "RESUME_KEYS", "BenchConfig", "Problem", "fast_p",
    "geomean_speedup", "kernelbench_problems", "machine_record", "markdown_table",
    "plot_speedups", "replace_block", "run_bench", "sample_indices",
    "search_gain", "solve_problem", "source_digest", "summarize", "summary_table",
    "synthetic_problems", "write_report", "write_results",
]
