"""The search itself: candidates per fragment, judged (fragments as a pre-filter), composed, and
the faster correct one of the composition and the best whole-program candidate."""

from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Protocol, runtime_checkable

from drtriton import provenance
from drtriton.judge import JudgeConfig, JudgePool, Verdict
from drtriton.search.compose import Choice, best_cover, verdict_cost
from drtriton.search.fragments import Fragment
from drtriton.search.verdict_cache import VerdictCache, judging_settings

Generator = Callable[[str], list[str]]  # fragment source -> candidate sources


@runtime_checkable
class PoolBound(Protocol):
    """A generator that runs work in the search's judge pool (compiling a user's fragment is
    running it): the search binds its pool before the first call."""

    def bind(self, pool: JudgePool) -> Generator: ...


@dataclass(frozen=True)
class SearchConfig:
    """Budgets and settings of one search."""

    device: str = "auto"
    mode: str = "strict"  # the judge's mode (the caller's compiler policy follows it)
    preset: str = "hardened"
    max_fragment_ops: int = 4
    candidates_per_fragment: int = 4
    # no fragment range is started unless the longest range so far and the composed program's
    # verdict (estimated by the longest whole-program verdict) still fit in it
    wall_time_s: float = 600.0
    cache_path: str | None = None  # SQLite file of verified fragments; None: no cache
    judge_workers: int | None = None
    judge_timeout_s: float = 120.0

    def fragment_judge_config(self) -> JudgeConfig:
        return fragment_judge_config(self.judge_config())

    def judge_config(self) -> JudgeConfig:
        return JudgeConfig(
            preset=self.preset, mode=self.mode, device=self.device, timeout_s=self.judge_timeout_s
        )


FRAGMENT_TRIALS = 2  # the judge's minimum: one trial after the candidate already ran


FRAGMENT_REPETITIONS = 30


FRAGMENT_INPUT_SETS = 1  # timed (and re-checked after timing) on one input set


FRAGMENT_TIMING_BUDGET_S = 0.5


def fragment_judge_config(whole: JudgeConfig) -> JudgeConfig:
    """How fragments are judged: a pre-filter, since the composed program is judged in full.

    No torch.compile baseline (only candidate times rank fragments), the minimum number of
    correctness trials, fewer timing repetitions on one input set (the re-check after timing
    ships every timed set's outputs again: 18 s of a 68 s fragment verdict on the H200) and a
    shorter timing budget; a fragment verdict is most of a search's cost.
    """
    return dataclasses.replace(
        whole, time_compile=False, trials=FRAGMENT_TRIALS,
        repetitions=min(whole.repetitions, FRAGMENT_REPETITIONS),
        input_sets=min(whole.input_sets, FRAGMENT_INPUT_SETS),
        timing_budget_s=min(whole.timing_budget_s, FRAGMENT_TIMING_BUDGET_S),
    )


@dataclass(frozen=True)
class SearchReport:
    """What the search found and what it spent."""

    status: str  # the final verdict's status
    source: str | None  # the chosen candidate program
    chosen: str  # "composed", "whole" or "none"
    verdict: Verdict | None
    whole_verdict: Verdict | None
    composed_verdict: Verdict | None
    segmentation: list[list[int]]  # [start, stop) node ranges of the chosen composition
    fragments_tried: int
    candidates_judged: int
    cache_hits: int
    wall_s: float
    timed: bool
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict:
        d = asdict(self)
        for key in ("verdict", "whole_verdict", "composed_verdict"):
            v = getattr(self, key)
            d[key] = v.to_dict() if v is not None else None
        return d


def cache_environment(config: SearchConfig, device: str) -> dict:
    """What a cached verdict depends on besides the two sources."""
    gpu = provenance.gpu_record(device)["device_name"] if device.startswith("cuda") else "cpu"
    return {"gpu": gpu, **provenance.library_versions(("torch", "triton")),
            "preset": config.preset, "mode": config.mode}


class _Judge:
    """Judge calls through a warm pool and the cache, counted."""

    def __init__(self, pool: JudgePool, cache: VerdictCache) -> None:
        self.pool, self.cache = pool, cache
        self.calls = self.hits = 0
        # the longest verdict this judge gave; a cache hit counts with the time its verdict took
        # when judged, or a resumed search (whole program cached) reserved nothing for the
        # composed verdict and overran its budget on the H200 (L20-37: 269 s against 220 s)
        self.longest_s = 0.0

    def _key(self, reference: str) -> str:
        return f"{judging_settings(self.pool.config)}\0{reference}"

    def cached(self, reference: str, candidate: str) -> Verdict | None:
        return self.cache.get(self._key(reference), candidate)

    def __call__(self, reference: str, candidate: str) -> Verdict:
        cached = self.cached(reference, candidate)
        if cached is not None:
            self.hits += 1
            self.longest_s = max(self.longest_s, cached.wall_s)
            return cached
        self.calls += 1
        started = time.perf_counter()
        verdict = self.pool.verify(reference, candidate)
        self.longest_s = max(self.longest_s, time.perf_counter() - started)
        self.cache.put(self._key(reference), candidate, verdict)
        return verdict


def _best_candidate(
    judge: _Judge, reference: str, candidates: Sequence[str],
    next_fits: Callable[[], bool] = lambda: True, skipped: list[str] | None = None,
) -> tuple[str, Verdict] | None:
    """The fastest correct candidate (the first correct one where nothing is timed). After the
    first verdict, a candidate not in the cache is judged only if ``next_fits()``: on the H200 two
    new whole-program verdicts of 100 s each took a search 218 s past its 150 s budget."""
    best: tuple[str, Verdict] | None = None
    for i, candidate in enumerate(candidates):
        if i and not next_fits() and judge.cached(reference, candidate) is None:
            if skipped is not None:
                skipped.append(candidate)
            continue
        verdict = judge(reference, candidate)
        if verdict.ok and (best is None or verdict_cost(verdict) < verdict_cost(best[1])):
            best = (candidate, verdict)
    return best


class _Budget:
    """The search's wall-time budget, counted from its start."""

    def __init__(self, wall_time_s: float) -> None:
        self.wall_time_s = wall_time_s
        self.started = time.perf_counter()

    def spent_s(self) -> float:
        return time.perf_counter() - self.started

    def fits(self, still_needed_s: float) -> bool:
        """Whether work expected to take ``still_needed_s`` more ends within the budget. Before a
        fragment range that is the longest range so far plus the longest whole-program verdict
        (what the composed program's verdict costs): the range in flight and the composed verdict
        must fit too, not only the range's start."""
        return self.spent_s() + still_needed_s <= self.wall_time_s


@dataclass(frozen=True)
class _Outcome:
    """What a search found and spent, before its two contestants are ranked."""

    whole: tuple[str, Verdict] | None  # the best whole-program candidate and its verdict
    composed_source: str | None
    composed: Verdict | None
    cover: Sequence[Choice]  # the fragments composed
    fragments_tried: int
    candidates_judged: int
    cache_hits: int
    wall_s: float
    timed: bool
    notes: list[str]


def search(
    reference: str,
    config: SearchConfig,
    generators: Sequence[Generator],
    pool: JudgePool | None = None,
    fragment_pool: JudgePool | None = None,
    on_progress: Callable[[str], None] | None = None,
) -> SearchReport:
    """Search for the fastest verified candidate of ``reference`` (see the module docstring).

    ``pool`` judges whole programs; ``fragment_pool`` (default: ``pool``) judges fragments, and
    may skip the torch.compile baseline (``fragment_judge_config``): only candidate times matter
    there, and compiling every fragment's reference would dominate the search's cost.
    ``on_progress(message)`` hears what the search is judging: a GPU search takes minutes.
    ``generators`` propose the candidates (the caller's policies: search knows none of them;
    ``drtriton.policy.CompilerPolicy(...).search_generator()`` is the built-in compiler's).
    """
    if not generators:
        raise ValueError("search needs at least one candidate generator")
    budget = _Budget(config.wall_time_s)
    device = config.judge_config().resolved_device()
    with _judges(config, device, pool, fragment_pool) as (judge, fragment_judge):
        steps = _Search(config, generators, judge, fragment_judge, budget, on_progress)
        steps.run(reference)
    # counted once the pools are closed: closing them is part of the search's time
    return _report(_Outcome(
        whole=steps.whole, composed_source=steps.composed_source, composed=steps.composed,
        cover=steps.cover or [], fragments_tried=steps.tried,
        candidates_judged=judge.calls + fragment_judge.calls,
        cache_hits=judge.hits + fragment_judge.hits,
        wall_s=budget.spent_s(), timed=device.startswith("cuda"), notes=steps.notes,
    ))


@contextmanager
def _judges(
    config: SearchConfig, device: str, pool: JudgePool | None, fragment_pool: JudgePool | None,
) -> Iterator[tuple[_Judge, _Judge]]:
    """The whole-program and the fragment judge over one cache, on the pools given or on pools
    of their own (closed on exit); without a fragment pool, fragments are judged by ``pool``."""
    own_pool = pool is None
    pool = pool or JudgePool(config.judge_config(), config.judge_workers)
    own_fragment_pool = fragment_pool is None and own_pool
    if own_fragment_pool:
        fragment_pool = JudgePool(config.fragment_judge_config(), config.judge_workers)
    try:
        cache = VerdictCache(config.cache_path, cache_environment(config, device))
        yield _Judge(pool, cache), _Judge(fragment_pool or pool, cache)
    finally:
        if own_pool:
            pool.close()
        if own_fragment_pool:
            fragment_pool.close()


class _Search:
    """One search's steps: the whole-program candidates, the fragment loop, the composition."""

    def __init__(self, config: SearchConfig, generators: Sequence[Generator], judge: _Judge,
                 fragment_judge: _Judge, budget: _Budget,
                 on_progress: Callable[[str], None] | None) -> None:
        self.config, self.budget = config, budget
        self.generators = [g.bind(judge.pool) if isinstance(g, PoolBound) else g
                           for g in generators]
        self.judge, self.fragment_judge = judge, fragment_judge
        self.say = on_progress or (lambda message: None)
        self.notes: list[str] = []
        self.whole: tuple[str, Verdict] | None = None
        self.composed_source: str | None = None
        self.composed: Verdict | None = None
        self.cover: list[Choice] | None = None  # None: no cover by verified fragments
        self.tried = 0

    def run(self, reference: str) -> None:
        self.say("judging the whole-program candidates")
        self.whole = self._judge_whole(reference)
        planned = self.judge.pool.call(
            reference, "drtriton.search.fragments:plan_in_child",
            {"max_ops": self.config.max_fragment_ops}, phase="search trace")
        searchable = planned["searchable"]
        if not searchable:
            self.notes.append("the constructor cannot be copied into fragments: searched whole")
        fragments = [Fragment(**{**f, "inputs": tuple(f["inputs"]), "outputs": tuple(f["outputs"])})
                     for f in planned["fragments"]]
        choices = self._fragments(fragments, planned["nodes"]) if searchable else {}
        self._compose(reference, planned["nodes"], choices)
        if self.cover is None and searchable:
            self.notes.append("no cover of the program by verified fragments")

    def _judge_whole(self, reference: str) -> tuple[str, Verdict] | None:
        skipped: list[str] = []
        judge = self.judge
        whole = _best_candidate(judge, reference, self._propose(reference),
                                lambda: self.budget.fits(judge.longest_s), skipped)
        if skipped:
            self.notes.append(
                f"{len(skipped)} whole-program candidates not judged: wall-time budget")
        return whole

    def _fragments(self, fragments: list[Fragment], nodes: int
                   ) -> dict[tuple[int, int], Choice]:
        """The best verified candidate of each fragment range, while the budget lasts."""
        choices: dict[tuple[int, int], Choice] = {}
        longest_range_s = 0.0
        wall_time_s = self.config.wall_time_s
        for fragment in fragments:
            start, stop = fragment.start, fragment.stop
            if not self.budget.fits(self.judge.longest_s + longest_range_s):
                self.notes.append(f"wall-time budget of {wall_time_s:.0f} s reached")
                break
            self.tried += 1
            self.say(f"fragment {self.tried}: nodes {start}-{stop - 1} of {nodes}, "
                     f"{self.budget.spent_s():.0f} of {wall_time_s:.0f} s spent")
            range_started = time.perf_counter()
            found = _best_candidate(
                self.fragment_judge, fragment.source, self._propose(fragment.source),
                lambda: self.budget.fits(self.fragment_judge.longest_s + self.judge.longest_s),
            )
            longest_range_s = max(longest_range_s, time.perf_counter() - range_started)
            if found:
                choices[(start, stop)] = Choice(fragment, *found)
        return choices

    def _compose(self, reference: str, nodes: int,
                 choices: dict[tuple[int, int], Choice]) -> None:
        """Judge the best cover of the program by verified fragments, composed (in a sandboxed
        child: it traces the program again), if there is one."""
        self.cover = best_cover(nodes, choices) if choices else None
        if not self.cover:
            return
        cover = [[c.fragment.start, c.fragment.stop, c.candidate] for c in self.cover]
        self.composed_source = self.judge.pool.call(
            reference, "drtriton.search.fragments:compose_in_child", {"cover": cover},
            phase="search composition")["source"]
        if self.composed_source:
            self.say(f"judging the composition of {len(self.cover)} fragments")
            self.composed = self.judge(reference, self.composed_source)

    def _propose(self, source: str) -> list[str]:
        candidates: list[str] = []
        for generate in self.generators:
            candidates += [c for c in generate(source) if c not in candidates]
        return candidates[: self.config.candidates_per_fragment]


def _report(outcome: _Outcome) -> SearchReport:
    whole, composed = outcome.whole, outcome.composed
    options = []
    if whole is not None:
        options.append(("whole", whole[0], whole[1]))
    if composed is not None and composed.ok:
        options.append(("composed", outcome.composed_source, composed))
    if options:
        rank = _ranking([verdict for _, _, verdict in options])
        chosen, source, verdict = min(options, key=lambda o: rank(o[2]))
    else:
        chosen, source, verdict = "none", None, composed
    segmentation = (
        [[c.fragment.start, c.fragment.stop] for c in outcome.cover] if chosen == "composed"
        else []
    )
    return SearchReport(
        status=verdict.status if verdict else "incorrect",
        source=source,
        chosen=chosen,
        verdict=verdict,
        whole_verdict=whole[1] if whole else None,
        composed_verdict=composed,
        segmentation=segmentation,
        fragments_tried=outcome.fragments_tried,
        candidates_judged=outcome.candidates_judged,
        cache_hits=outcome.cache_hits,
        wall_s=round(outcome.wall_s, 3),
        timed=outcome.timed,
        notes=outcome.notes,
    )


def _ranking(verdicts: list[Verdict]) -> Callable[[Verdict], float]:
    """The sort key of contestants, smaller first. Where all were timed against eager, speedup:
    each is a ratio measured side by side in its own verdict, while raw times of two verdicts are
    not (on the H200 eager itself took 1.26 ms in one verdict and 1.63 ms in the next). Otherwise
    the time; on a CPU every piece costs 1 and the whole-program candidate (listed first) wins."""
    if all(v.speedup_eager for v in verdicts):
        return lambda v: -v.speedup_eager
    return verdict_cost


def write_report(report: SearchReport, path: str | Path) -> None:
    Path(path).write_text(json.dumps(report.to_dict(), indent=2) + "\n")
