"""Test-time fragment search: split a program, verify and time candidates per fragment, compose.

1. **Split.** The program's ``forward`` is traced with torch.fx and its shapes propagated with the
   reference's own inputs. A *fragment* is a run of consecutive graph nodes (topological order)
   with up to ``max_fragment_ops`` operators (views and casts are free); its explicit inputs are the
   tensors it reads from outside, its outputs the tensors used later. Each fragment is rendered as
   a small KernelBench-format program with the shapes seen at run time.
2. **Candidates.** For each fragment the generators the caller gives (``drtriton.policy``: the
   built-in compiler in strict or hybrid mode; an LLM policy) propose candidate programs; search
   imports no policy. Each candidate is verified by the judge and, on a GPU, timed. Verdicts are
   cached in SQLite by content hash, device and library versions, so a fragment repeated across
   programs is judged once.
3. **Compose.** Dynamic programming over the topological order picks the cover of the program by
   verified fragments with the least total time (on a CPU, where nothing is timed, the fewest
   fragments: larger fusions). The chosen candidates are renamed apart and chained in one
   ``ModelNew``, which is verified (and timed) end to end. The result is the faster correct one of
   the composition and the best whole-program candidate.

Programs with parameters (``nn.Conv2d`` and the like): every fragment is built by the program's own
constructor, so a seeded build holds the program's values, and the composition builds each
fragment from the same random state (then shares one copy of each tensor). A constructor that
cannot be copied (non-torch modules, non-literal arguments) leaves the program searched whole.
``SearchReport`` says what was spent.

    from drtriton.policy import CompilerPolicy
    from drtriton.search import SearchConfig, search
    compiler = CompilerPolicy().search_generator()  # compiles in the judge's sandbox
    report = search(reference_source, SearchConfig(device="cpu"), [compiler])
"""

from drtriton.search.compose import Choice, best_cover, compose, verdict_cost
from drtriton.search.engine import (
    FRAGMENT_INPUT_SETS,
    FRAGMENT_REPETITIONS,
    FRAGMENT_TIMING_BUDGET_S,
    FRAGMENT_TRIALS,
    Generator,
    SearchConfig,
    SearchReport,
    cache_environment,
    fragment_judge_config,
    search,
    write_report,
)
from drtriton.search.fragments import (
    Fragment,
    Traced,
    boundary_numel,
    is_free,
    make_fragment,
    segments,
    trace,
)
from drtriton.search.verdict_cache import VerdictCache, judging_settings

__all__ = [
    "FRAGMENT_INPUT_SETS", "FRAGMENT_REPETITIONS", "FRAGMENT_TIMING_BUDGET_S", "FRAGMENT_TRIALS",
    "Choice", "Fragment", "Generator", "SearchConfig", "SearchReport", "Traced", "VerdictCache",
    "best_cover", "boundary_numel", "cache_environment", "compose", "fragment_judge_config",
    "is_free", "judging_settings", "make_fragment", "search", "segments", "trace", "verdict_cost",
    "write_report",
]
