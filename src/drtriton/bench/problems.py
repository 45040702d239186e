"""Which problems a benchmark runs: held-out synthetic samples or a KernelBench checkout."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

# Synthetic suites use this seed, which training never uses (``drtriton.train`` refuses it), so
# benchmark programs are held out by construction.
HELD_OUT_SEED = 1_000_003


@dataclass(frozen=True)
class Problem:
    id: str
    level: int
    source: str
    ops: tuple[str, ...] = ()
    record: object = None  # the SynthProgram of a synthetic problem


@dataclass(frozen=True)
class BenchConfig:
    """One benchmark run: which problems, which policy, which judge settings."""

    suite: str = "synthetic"  # synthetic | kernelbench
    levels: tuple[int, ...] = (1, 2, 5, 20)
    num: int = 10  # programs per level (synthetic) or at most this many per level (kernelbench)
    scale: str = "small"
    seed: int = HELD_OUT_SEED
    programs: str | None = None  # a synthesized JSONL to use instead of synthesizing here
    path: str | None = None  # KernelBench checkout (suite kernelbench)
    policy: str = "compiler"  # compiler | hf:MODEL_DIR | openai:BASE_URL#MODEL
    samples: int = 1  # answers per fragment from an LLM policy when searching (pass@1 otherwise)
    search: bool = False
    mode: str = "strict"
    preset: str = "hardened"
    device: str = "auto"
    max_fragment_ops: int = 4
    search_wall_s: float = 600.0  # per problem (SearchConfig.wall_time_s)
    candidates_per_fragment: int = 4
    # a local model's sampling (hf: policies)
    temperature: float = 0.6
    max_new_tokens: int = 2048
    generation_batch_size: int = 32  # prompts a local model samples at once
    # search also over the compiler's own candidates; off to measure what a policy finds alone
    search_with_compiler: bool = True
    # SQLite verdict cache of the search; None: OUT.search.sqlite beside the report, so a run cut
    # short mid-search resumes without judging its fragments again
    search_cache: str | None = None
    timeout_s: float = 300.0
    # timing (CUDA): the torch.compile baseline, and timed calls for about this long per
    # candidate (the judge's default; less trades precision of the times for a faster run)
    compile_baseline: bool = True
    timing_budget_s: float = 1.0
    unsafe_no_sandbox: bool = False  # judge without bubblewrap (recorded in every verdict)
    # host-memory cap per candidate process; GPU-scale inputs (up to 16 GB) pass through the host
    memory_limit_gb: float | None = None  # None: 8 on a CPU, 64 on a GPU

    def memory_limit(self, device: str) -> float:
        return self.memory_limit_gb or (64.0 if device.startswith("cuda") else 8.0)


def sample_indices(level: int, num: int, seed: int) -> list[int]:
    """Program indices of a benchmark sample: spread over the sweeps at levels 1 and 2 (the
    first indices of a sweep would all start with the same operator), consecutive above."""
    import random

    from drtriton.ops import OPS

    if level == 1:
        return (
            sorted({k * len(OPS) // num for k in range(num)})
            if num < len(OPS)
            else list(range(num))
        )
    if level == 2:
        pairs = len(OPS) ** 2
        return sorted(random.Random(f"bench:{seed}").sample(range(pairs), min(num, pairs)))
    return list(range(num))


def synthetic_problems(config: BenchConfig) -> list[Problem]:
    """Held-out synthetic programs: from ``config.programs`` or synthesized now."""
    if config.programs:
        from drtriton.synth.programs import read_jsonl  # no OR-Tools needed to read them

        stored = read_jsonl(config.programs)
        records = [
            p
            for level in config.levels
            for p in [q for q in stored if q.level == level][: config.num]
        ]
        if not records:  # an empty report would look like a finished benchmark
            have = sorted({p.level for p in stored})
            raise ValueError(f"{config.programs}: no programs at levels "
                             f"{','.join(map(str, config.levels))} (the file has "
                             f"{'levels ' + ','.join(map(str, have)) if have else 'none'})")
    else:
        from drtriton.synth import SynthConfig, synthesize_one

        records = []
        for level in config.levels:
            synth = SynthConfig(level=level, num=1, seed=config.seed, scale=config.scale)
            indices = sample_indices(level, config.num, config.seed)
            records += [synthesize_one(synth, i).program for i in indices]
    return [
        Problem(f"L{p.level}-{p.index}-{p.id}", p.level, p.source, tuple(p.ops), p) for p in records
    ]


def kernelbench_problems(
    path: str | Path, levels: Sequence[int], limit: int | None = None
) -> list[Problem]:
    """Problems of a KernelBench checkout (``KernelBench/level{N}/{i}_{name}.py``), numeric order.

    ``path`` may be the checkout's root, its ``KernelBench`` folder or a level folder. The project
    ships no KernelBench data: evaluation only.
    """
    root = Path(path)
    problems = []
    for level in levels:
        folder = next(
            (
                d
                for d in (root / "KernelBench" / f"level{level}", root / f"level{level}", root)
                if d.is_dir() and any(d.glob("*.py"))
            ),
            None,
        )
        if folder is None:
            raise FileNotFoundError(f"no KernelBench level{level} folder under {root}")
        files = sorted(
            folder.glob("*.py"),
            key=lambda f: (
                int(f.name.split("_")[0]) if f.name.split("_")[0].isdigit() else 1 << 30,
                f.name,
            ),
        )
        for f in files[:limit]:
            problems.append(Problem(f"L{level}-{f.stem}", level, f.read_text()))
    return problems
