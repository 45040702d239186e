"""Test-time fragment search: split a program, verify and time candidates per fragment, compose.

1. **Split.** The program's ``forward`` is traced with torch.fx and its shapes propagated with the
   reference's own inputs. A *fragment* is a run of consecutive graph nodes (topological order)
   with up to ``max_fragment_ops`` operators (views and casts are free); its explicit inputs are the
   tensors it reads from outside, its outputs the tensors used later. Each fragment is rendered as
   a small KernelBench-format program with the shapes seen at run time.
2. **Candidates.** For each fragment the configured generators (the built-in compiler in strict or
   hybrid mode; an LLM policy when given) propose candidate programs; each is verified by the judge
   and, on a GPU, timed. Verdicts are cached in SQLite by content hash, device and library versions,
   so a fragment repeated across programs is judged once.
3. **Compose.** Dynamic programming over the topological order picks the cover of the program by
   verified fragments with the least total time (on a CPU, where nothing is timed, the fewest
   fragments: larger fusions). The chosen candidates are renamed apart and chained in one
   ``ModelNew``, which is verified (and timed) end to end. The result is the faster correct one of
   the composition and the best whole-program candidate.

Programs with parameters (``nn.Linear`` and the like) are searched whole: fragments would need the
parent's parameters. ``SearchReport`` says what was spent.

    from drtriton.search import SearchConfig, search
    report = search(reference_source, SearchConfig(device="cpu"))
"""

from __future__ import annotations

import ast
import dataclasses
import hashlib
import json
import operator
import sqlite3
import textwrap
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

import torch
import torch.fx as fx

from drtriton.judge import JudgeConfig, JudgePool, Verdict
from drtriton.program import FX_TRACE_LOCK, load_program

Generator = Callable[[str], list[str]]  # fragment source -> candidate sources

_GETTERS = (operator.getitem, getattr)  # tie a tuple/namedtuple result to its producer


@dataclass(frozen=True)
class SearchConfig:
    """Budgets and settings of one search."""

    device: str = "auto"
    mode: str = "strict"  # judge and compiler mode
    preset: str = "hardened"
    max_fragment_ops: int = 4
    candidates_per_fragment: int = 4
    wall_time_s: float = 600.0  # no new fragment is tried after this
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
FRAGMENT_TIMING_BUDGET_S = 10.0


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
class Fragment:
    """Nodes [start, stop) of the traced graph, as a standalone KernelBench program."""

    start: int
    stop: int
    ops: int
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    source: str


@dataclass(frozen=True)
class Choice:
    """A verified candidate for one fragment."""

    fragment: Fragment
    candidate: str
    verdict: Verdict

    @property
    def cost(self) -> float:
        return verdict_cost(self.verdict)


def verdict_cost(verdict: Verdict) -> float:
    """Milliseconds where timed; with no timing (CPU) every piece costs 1, so fewer, larger
    fragments win and a whole-program candidate ties with any single fragment."""
    return verdict.runtime_ms if verdict.runtime_ms is not None else 1.0


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


# ----------------------------------------------------------------------------- splitting
@dataclass(frozen=True)
class Traced:
    graph: fx.Graph
    nodes: list[fx.Node]  # compute nodes in topological order
    placeholders: list[fx.Node]
    has_parameters: bool


def trace(source: str) -> Traced:
    """Trace ``Model.forward`` and record every node's tensor shape and dtype."""
    from torch.fx.passes.shape_prop import ShapeProp

    module = load_program(source, "search_reference")
    torch.manual_seed(0)
    model = module.Model(*module.get_init_inputs())
    with FX_TRACE_LOCK:
        gm = fx.symbolic_trace(model)
    try:  # shapes from meta tensors: a GPU-scale program would take minutes on the CPU
        with torch.device("meta"):
            ShapeProp(gm).propagate(*module.get_inputs())
    except Exception:  # an op without a meta kernel: propagate real tensors
        torch.manual_seed(1)
        ShapeProp(gm).propagate(*module.get_inputs())
    has_params = any(True for _ in model.parameters()) or any(True for _ in model.buffers())
    nodes = [
        n
        for n in gm.graph.nodes
        if n.op in ("call_function", "call_method", "call_module", "get_attr")
    ]
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    return Traced(gm.graph, nodes, placeholders, has_params)


def _is_free(node: fx.Node) -> bool:
    """Views, casts and getters cost no operator."""
    if node.op == "call_function" and node.target in _GETTERS:
        return True
    views = {
        "reshape",
        "view",
        "float",
        "contiguous",
        "flatten",
        "squeeze",
        "unsqueeze",
        "permute",
        "transpose",
    }
    return node.op == "call_method" and node.target in views


def _can_cut_before(node: fx.Node) -> bool:
    return not (node.op == "call_function" and node.target in _GETTERS)


def make_fragment(traced: Traced, start: int, stop: int) -> Fragment | None:
    """The fragment of nodes [start, stop), or None if it cannot stand alone."""
    inside = traced.nodes[start:stop]
    members = set(inside)
    inputs: list[fx.Node] = []
    for node in inside:
        for arg in node.all_input_nodes:
            if arg not in members and arg not in inputs:
                inputs.append(arg)
    outputs = [n for n in inside if any(u not in members for u in n.users)]
    if not outputs or any(_tensor_meta(n) is None for n in inputs + outputs):
        return None
    source = _fragment_source(inside, inputs, outputs)
    ops = sum(not _is_free(n) for n in inside)
    return Fragment(
        start, stop, ops, tuple(n.name for n in inputs), tuple(n.name for n in outputs), source
    )


def _tensor_meta(node: fx.Node):
    meta = node.meta.get("tensor_meta")
    return meta if hasattr(meta, "shape") else None


def _fragment_source(inside: list[fx.Node], inputs: list[fx.Node], outputs: list[fx.Node]) -> str:
    graph = fx.Graph()
    env: dict[fx.Node, fx.Node] = {}
    for node in inputs:
        env[node] = graph.placeholder(node.name)
    for node in inside:
        env[node] = graph.node_copy(node, lambda n: env[n])
    result = env[outputs[0]] if len(outputs) == 1 else tuple(env[n] for n in outputs)
    graph.output(result)
    code = fx.GraphModule(torch.nn.Module(), graph).code.strip()
    randn = [_input_expr(_tensor_meta(n)) for n in inputs]
    return _FRAGMENT_TEMPLATE.format(
        forward=textwrap.indent(code, "    "), inputs=",\n        ".join(randn)
    )


def _input_expr(meta) -> str:
    shape = tuple(meta.shape)
    if meta.dtype.is_floating_point:
        return f"torch.randn{shape}" if len(shape) != 1 else f"torch.randn({shape[0]})"
    # integer tensors come from argmax/argmin: small non-negative values
    return f"torch.randint(0, 8, {shape}, dtype={meta.dtype})"


_FRAGMENT_TEMPLATE = '''import torch
import torch.nn as nn


class Model(nn.Module):
    """A fragment of a larger program."""

    def __init__(self):
        super().__init__()

{forward}


def get_inputs():
    return [
        {inputs},
    ]


def get_init_inputs():
    return []
'''


# ----------------------------------------------------------------------------- candidates and cache
def compiler_generator(mode: str, device: str) -> Generator:
    """The built-in compiler as a candidate generator: its strict translation, and under a hybrid
    judge also its hybrid one (vendor matmul/convolution), each a different fusion of the piece."""
    from drtriton.compiler import CompilerConfig, compile_program

    target = "cuda" if device.startswith("cuda") else "cpu"
    configs = [
        CompilerConfig(mode=m, device=target)
        for m in ("strict", "hybrid")
        if m == "strict" or mode == "hybrid"
    ]

    def generate(source: str) -> list[str]:
        candidates = []
        for config in configs:
            try:
                candidates.append(compile_program(source, config))
            except Exception:  # an operator it cannot lower (or a trace failure): no candidate
                continue
        return candidates

    return generate


def policy_generator(policy, samples: int, sampling=None) -> Generator:
    """An LLM policy (``drtriton.policy``) as a candidate generator: ``samples`` answers per
    fragment, parsed into candidate programs; answers that do not parse are dropped."""
    from drtriton.policy import AnswerParseError, Sampling, parse_answer

    sampling = sampling or Sampling()

    def generate(source: str) -> list[str]:
        candidates = []
        for answer in policy.generate([source], samples, sampling)[0]:
            try:
                candidates.append(parse_answer(answer))
            except AnswerParseError:
                continue
        return candidates

    return generate


class VerdictCache:
    """SQLite cache of verdicts keyed by (reference, candidate, device, versions, judge settings)."""

    def __init__(self, path: str | None, environment: dict) -> None:
        self.db = sqlite3.connect(path) if path else None
        self.salt = json.dumps(environment, sort_keys=True)
        if self.db is not None:
            self.db.execute(
                "CREATE TABLE IF NOT EXISTS verdicts (key TEXT PRIMARY KEY, verdict TEXT)"
            )

    def key(self, reference: str, candidate: str) -> str:
        return hashlib.sha256("\0".join((self.salt, reference, candidate)).encode()).hexdigest()

    def get(self, reference: str, candidate: str) -> Verdict | None:
        if self.db is None:
            return None
        row = self.db.execute(
            "SELECT verdict FROM verdicts WHERE key = ?", (self.key(reference, candidate),)
        ).fetchone()
        return Verdict.from_dict(json.loads(row[0])) if row else None

    def put(self, reference: str, candidate: str, verdict: Verdict) -> None:
        if self.db is not None:
            self.db.execute(
                "INSERT OR REPLACE INTO verdicts VALUES (?, ?)",
                (self.key(reference, candidate), verdict.to_json()),
            )
            self.db.commit()


def cache_environment(config: SearchConfig, device: str) -> dict:
    """What a cached verdict depends on besides the two sources."""
    import triton

    gpu = torch.cuda.get_device_name(0) if device.startswith("cuda") else "cpu"
    return {
        "gpu": gpu,
        "torch": torch.__version__,
        "triton": triton.__version__,
        "preset": config.preset,
        "mode": config.mode,
    }


# ----------------------------------------------------------------------------- composition
def _rename_apart(candidate: str, prefix: str) -> tuple[list[str], str]:
    """Prefix every top-level name a candidate defines; return (its imports, the rest)."""
    tree = ast.parse(candidate)
    imports = [ast.unparse(s) for s in tree.body if isinstance(s, ast.Import | ast.ImportFrom)]
    body = [s for s in tree.body if not isinstance(s, ast.Import | ast.ImportFrom)]
    defined: set[str] = set()
    for stmt in body:
        if isinstance(stmt, ast.FunctionDef | ast.ClassDef):
            defined.add(stmt.name)
        elif isinstance(stmt, ast.Assign | ast.AnnAssign):
            targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
            defined.update(t.id for t in targets if isinstance(t, ast.Name))

    class Renamer(ast.NodeTransformer):
        def visit_Name(self, node: ast.Name) -> ast.Name:
            if node.id in defined:
                node.id = prefix + node.id
            return node

        def visit_FunctionDef(self, node: ast.FunctionDef) -> ast.FunctionDef:
            self.generic_visit(node)
            if node.name in defined:
                node.name = prefix + node.name
            return node

        def visit_ClassDef(self, node: ast.ClassDef) -> ast.ClassDef:
            self.generic_visit(node)
            if node.name in defined:
                node.name = prefix + node.name
            return node

    module = Renamer().visit(ast.Module(body=body, type_ignores=[]))
    return imports, ast.unparse(module)


def compose(traced: Traced, choices: Sequence[Choice]) -> str:
    """One candidate program chaining the chosen fragment candidates in order."""
    imports: list[str] = ["import torch", "import torch.nn as nn"]
    parts: list[str] = []
    lines = []
    for k, choice in enumerate(choices):
        frag_imports, body = _rename_apart(choice.candidate, f"_f{k}_")
        imports += [i for i in frag_imports if i not in imports]
        parts.append(
            f"# ---- fragment {k}: nodes {choice.fragment.start}..{choice.fragment.stop - 1}\n{body}"
        )
        outs = ", ".join(choice.fragment.outputs)  # a tuple-returning fragment unpacks
        lines.append(f"        {outs} = self.f{k}({', '.join(choice.fragment.inputs)})")
    result = [n for n in traced.graph.nodes if n.op == "output"][0].args[0]
    ret = ", ".join(n.name for n in result) if isinstance(result, tuple | list) else result.name
    init = "\n".join(f"        self.f{k} = _f{k}_ModelNew()" for k in range(len(choices)))
    params = ", ".join(p.name for p in traced.placeholders)
    model = (
        "class ModelNew(nn.Module):\n"
        '    """Composition of verified fragment candidates (drtriton fragment search)."""\n\n'
        "    def __init__(self, *init_inputs):\n"
        f"        super().__init__()\n{init}\n\n"
        f"    def forward(self, {params}):\n" + "\n".join(lines) + f"\n        return {ret}\n"
    )
    return "\n".join(imports) + "\n\n\n" + "\n\n\n".join(parts) + "\n\n\n" + model


def best_cover(n: int, choices: dict[tuple[int, int], Choice]) -> list[Choice] | None:
    """Least-cost cover of nodes [0, n) by verified fragments (ties: fewer fragments)."""
    best: list[tuple[float, int, list[Choice]] | None] = [None] * (n + 1)
    best[0] = (0.0, 0, [])
    for stop in range(1, n + 1):
        for (start, end), choice in choices.items():
            if end != stop or best[start] is None:
                continue
            cost, count, path = best[start]
            option = (cost + choice.cost, count + 1, [*path, choice])
            if best[stop] is None or option[:2] < best[stop][:2]:
                best[stop] = option
    return best[n][2] if best[n] is not None else None


# ----------------------------------------------------------------------------- the search
class _Judge:
    """Judge calls through a warm pool and the cache, counted."""

    def __init__(self, pool: JudgePool, cache: VerdictCache) -> None:
        self.pool, self.cache = pool, cache
        self.calls = self.hits = 0

    def __call__(self, reference: str, candidate: str) -> Verdict:
        key_ref = f"{judging_settings(self.pool.config)}\0{reference}"
        cached = self.cache.get(key_ref, candidate)
        if cached is not None:
            self.hits += 1
            return cached
        self.calls += 1
        verdict = self.pool.verify(reference, candidate)
        self.cache.put(key_ref, candidate, verdict)
        return verdict


# JudgeConfig fields that do not change what a verdict means (where and how long it may run)
_NOT_JUDGING = ("device", "timeout_s", "seed", "memory_limit_gb", "output_cap_bytes",
                "scratch_dir", "extra")


def judging_settings(config: JudgeConfig) -> str:
    """Every judge setting a cached verdict depends on (trials, timing, baselines, preset, mode),
    as text for the cache key: a verdict cached under other settings is not reused."""
    fields = {k: v for k, v in dataclasses.asdict(config).items() if k not in _NOT_JUDGING}
    return json.dumps(fields, sort_keys=True, default=str)


def _best_candidate(
    judge: _Judge, reference: str, candidates: Sequence[str]
) -> tuple[str, Verdict] | None:
    """The fastest correct candidate (the first correct one where nothing is timed)."""
    best: tuple[str, Verdict] | None = None
    for candidate in candidates:
        verdict = judge(reference, candidate)
        if verdict.ok and (best is None or verdict_cost(verdict) < verdict_cost(best[1])):
            best = (candidate, verdict)
    return best


def _segments(traced: Traced, max_ops: int) -> list[tuple[int, int]]:
    """Candidate ranges, in the order they are judged: first a cover of the whole program by the
    largest ranges (left to right), so that a search cut short by its wall-time budget can still
    compose (at GPU scale one fragment verdict takes up to a minute); then every other range,
    single operators first."""
    n = len(traced.nodes)
    cuts = [i for i in range(n) if _can_cut_before(traced.nodes[i])] + [n]
    ranges = []
    for a, start in enumerate(cuts[:-1]):
        for stop in cuts[a + 1 :]:
            ops = sum(not _is_free(node) for node in traced.nodes[start:stop])
            if ops > max_ops:
                break
            if ops > 0:
                ranges.append((ops, start, stop))
    longest: dict[int, tuple[int, int]] = {}
    for _, start, stop in ranges:
        if stop > longest.get(start, (start, start))[1]:
            longest[start] = (start, stop)
    cover, position = [], 0
    while position in longest:
        cover.append(longest[position])
        position = longest[position][1]
    rest = [(start, stop) for _, start, stop in sorted(ranges) if (start, stop) not in cover]
    return cover + rest


def search(
    reference: str,
    config: SearchConfig | None = None,
    generators: Sequence[Generator] | None = None,
    pool: JudgePool | None = None,
    fragment_pool: JudgePool | None = None,
) -> SearchReport:
    """Search for the fastest verified candidate of ``reference`` (see the module docstring).

    ``pool`` judges whole programs; ``fragment_pool`` (default: ``pool``) judges fragments, and
    may skip the torch.compile baseline (``fragment_judge_config``): only candidate times matter
    there, and compiling every fragment's reference would dominate the search's cost.
    """
    config = config or SearchConfig()
    started = time.perf_counter()
    judge_config = config.judge_config()
    device = judge_config.resolved_device()
    generators = list(generators) if generators else [compiler_generator(config.mode, device)]
    own_pool = pool is None
    pool = pool or JudgePool(judge_config, config.judge_workers)
    own_fragment_pool = fragment_pool is None and own_pool
    if own_fragment_pool:
        fragment_pool = JudgePool(config.fragment_judge_config(), config.judge_workers)
    cache = VerdictCache(config.cache_path, cache_environment(config, device))
    judge = _Judge(pool, cache)
    fragment_judge = _Judge(fragment_pool or pool, cache)
    notes: list[str] = []
    try:
        whole = _best_candidate(judge, reference, _propose(generators, reference, config))
        traced = trace(reference)
        choices: dict[tuple[int, int], Choice] = {}
        tried = 0
        if traced.has_parameters:
            notes.append("program has parameters: searched whole, not by fragments")
        else:
            for start, stop in _segments(traced, config.max_fragment_ops):
                if time.perf_counter() - started > config.wall_time_s:
                    notes.append(f"wall-time budget of {config.wall_time_s:.0f} s reached")
                    break
                fragment = make_fragment(traced, start, stop)
                if fragment is None:
                    continue
                tried += 1
                found = _best_candidate(
                    fragment_judge, fragment.source, _propose(generators, fragment.source, config)
                )
                if found:
                    choices[(start, stop)] = Choice(fragment, *found)
        cover = best_cover(len(traced.nodes), choices) if choices else None
        composed_src = compose(traced, cover) if cover else None
        composed = judge(reference, composed_src) if composed_src else None
        if cover is None and not traced.has_parameters:
            notes.append("no cover of the program by verified fragments")
    finally:
        if own_pool:
            pool.close()
        if own_fragment_pool:
            fragment_pool.close()
    counts = (judge.calls + fragment_judge.calls, judge.hits + fragment_judge.hits)
    return _report(
        whole, composed_src, composed, cover or [], tried, counts, started, device, notes
    )


def _propose(generators: Sequence[Generator], source: str, config: SearchConfig) -> list[str]:
    candidates: list[str] = []
    for generate in generators:
        candidates += [c for c in generate(source) if c not in candidates]
    return candidates[: config.candidates_per_fragment]


def _report(
    whole, composed_src, composed, cover, tried, counts, started, device, notes
) -> SearchReport:
    options = []
    if whole is not None:
        options.append(("whole", whole[0], whole[1]))
    if composed is not None and composed.ok:
        options.append(("composed", composed_src, composed))
    if options:
        # faster of the two where timed; on a CPU the whole-program candidate (one piece) first
        chosen, source, verdict = min(options, key=lambda o: verdict_cost(o[2]))
    else:
        chosen, source, verdict = "none", None, composed
    segmentation = (
        [[c.fragment.start, c.fragment.stop] for c in cover] if chosen == "composed" else []
    )
    return SearchReport(
        status=verdict.status if verdict else "incorrect",
        source=source,
        chosen=chosen,
        verdict=verdict,
        whole_verdict=whole[1] if whole else None,
        composed_verdict=composed,
        segmentation=segmentation,
        fragments_tried=tried,
        candidates_judged=counts[0],
        cache_hits=counts[1],
        wall_s=round(time.perf_counter() - started, 3),
        timed=device.startswith("cuda"),
        notes=notes,
    )


def write_report(report: SearchReport, path: str | Path) -> None:
    Path(path).write_text(json.dumps(report.to_dict(), indent=2) + "\n")
