"""The learning experiment as one plan: a policy trained from scratch, then measured per stage.

``run_experiment(plan)`` runs, in its run directory, each stage not done yet (so a run cut at a
GPU call's time limit resumes where it stopped; SFT and RL from their checkpoints):

1. ``programs``: training programs (training seed; never the held-out seed) and the held-out
   evaluation programs (``HELD_OUT_SEED``), synthesized or copied from the plan's files;
2. ``tokenizer`` on the training programs; ``untrained``: a random model of the preset;
3. ``pairs`` with the compiler as teacher (``variants`` per program; every one verified, or
   those of a fixed sample of ``pairs_verify_fraction`` of the programs);
4. ``sft`` from the untrained model; ``drpo`` and ``grpo`` from the same SFT checkpoint with the
   same budget;
5. ``eval_<stage>`` for ``untrained``, ``sft``, ``drpo``, ``grpo``, and ``drpo_search`` (the
   DRPO policy as the search's only candidate generator), each a benchmark of the held-out
   programs, run as soon as its model exists (so a partial run has results), the untrained
   model's last: a random model's answers never parse, and drawing all 4,096 tokens of each took
   313 s on an H100, which a call cut short had better spend on the trained stages;
6. ``summary.json``: per level, per stage, ``accuracy``, ``mean_speedup_correct`` (over correct
   answers, against eager; null where nothing is timed, as on a CPU) and ``n``, with the RL steps'
   measured costs and the machine.

    drtriton learn --plan benchmarks/plans/learning.toml
    drtriton learn --plan benchmarks/plans/learning.toml --prepare-for cuda   # on a CPU, first

``prepare_experiment`` runs ahead, on a CPU, what a GPU run need not: stages 1 and 2 and the
pairs outside the verified sample (compiled for the GPU, unjudged).
"""

from __future__ import annotations

import json
import shutil
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, fields
from pathlib import Path

import tomllib

STAGES = ("untrained", "sft", "drpo", "grpo", "drpo_search")


@dataclass(frozen=True)
class ExperimentPlan:
    """One learning experiment (a TOML file of the same fields; paths relative to the repo)."""

    name: str
    out: str  # run directory (models, pairs, evaluations)
    results: str  # where summary.json and the curves go (benchmarks/results/learning/...)
    device: str = "auto"
    scale: str = "small"  # synthetic program sizes
    train_levels: tuple[int, ...] = (1, 2)
    train_programs_per_level: int = 200
    train_seed: int = 1
    train_programs: str = ""  # a JSONL to use instead of synthesizing (GPU machines lack OR-Tools)
    eval_levels: tuple[int, ...] = (1, 2, 5)
    eval_programs_per_level: int = 100
    eval_programs: str = ""  # held-out JSONL to use instead of synthesizing
    vocab_size: int = 8192
    split_digits: bool = True  # one token per digit (``build_tokenizer``)
    preset: str = "scratch"
    seed: int = 0
    variants: int = 4
    sft_steps: int = 200
    sft_batch_size: int = 8
    sft_lr: float = 1e-3
    sft_max_length: int = 4096
    rl_steps: int = 20
    rl_programs_per_step: int = 8
    rl_n: int = 8
    rl_lr: float = 1e-5
    rl_levels: tuple[int, ...] = (1, 2)
    max_new_tokens: int = 2048  # RL's answers
    # the held-out answers' (0: max_new_tokens): level-5 translations run longer than the
    # training levels' (with shape notes, 13 of 33 compiler answers over 2,048 tokens)
    eval_max_new_tokens: int = 0
    temperature: float = 0.6  # RL's and the search's sampling
    # the held-out answers' (0: greedy decoding, one deterministic answer per program)
    eval_temperature: float = 0.6
    search_wall_s: float = 120.0
    # judging cost: timed calls per candidate for about this long (CUDA; the judge's default is
    # 1 s), and the held-out evaluations' torch.compile baseline (the summary uses eager's)
    pairs_timing_budget_s: float = 1.0
    pairs_verify_fraction: float = 1.0  # judge this fixed sample of the programs' variants
    pairs_shape_notes: bool = False  # the teacher's answers state the shapes before the code
    eval_timing_budget_s: float = 1.0
    eval_compile_baseline: bool = True
    generation_batch_size: int = 32  # held-out prompts a model samples at once
    sft_fp32_weights: bool = True  # fp32 master weights under bf16 autocast (from scratch)
    sft_save_steps: int = 0  # checkpoint SFT every this many steps; a cut stage resumes there
    judge_workers: int | None = None
    unsafe_no_sandbox: bool = False

    def validate(self) -> None:
        from drtriton.bench import HELD_OUT_SEED
        from drtriton.train.model import PRESETS

        if self.train_seed == HELD_OUT_SEED:
            raise ValueError(f"train_seed {HELD_OUT_SEED} is the held-out benchmark seed")
        if self.preset not in PRESETS:
            raise ValueError(f"unknown preset {self.preset!r}; choose from {', '.join(PRESETS)}")
        counts = (self.train_programs_per_level, self.eval_programs_per_level, self.variants,
                  self.sft_steps, self.rl_steps, self.rl_programs_per_step)
        if min(counts) < 1 or self.rl_n < 2:
            raise ValueError("counts and steps must be at least 1, rl_n at least 2")
        if min(self.temperature, self.eval_temperature) < 0:
            raise ValueError("temperature and eval_temperature must be at least 0")
        if self.sft_save_steps < 0:
            raise ValueError("sft_save_steps must be at least 0 (0: no checkpoints)")
        if self.max_new_tokens < 1 or self.eval_max_new_tokens < 0:
            raise ValueError("max_new_tokens must be at least 1, eval_max_new_tokens at least 0")


def load_experiment(path: str | Path) -> ExperimentPlan:
    """An ``ExperimentPlan`` from TOML; unknown keys and bad values are one-line errors."""
    try:
        data = tomllib.loads(Path(path).read_text())
    except tomllib.TOMLDecodeError as exc:
        raise ValueError(f"{path}: not TOML ({exc})") from None
    known = {f.name for f in fields(ExperimentPlan)}
    unknown = sorted(set(data) - known)
    if unknown:
        raise ValueError(f"{path}: unknown keys {', '.join(unknown)}")
    for key in ("train_levels", "eval_levels", "rl_levels"):
        if key in data:
            data[key] = tuple(data[key])
    try:
        plan = ExperimentPlan(**data)
    except TypeError as exc:
        raise ValueError(f"{path}: {exc}") from None
    plan.validate()
    return plan


# ----------------------------------------------------------------------------- stages
# In order; each trained model's evaluation right after it, so a partial run has results, and
# the untrained baseline's last (see the module's docstring).
STAGE_NAMES = ("programs", "tokenizer", "untrained", "pairs", "sft", "eval_sft", "drpo",
               "eval_drpo", "grpo", "eval_grpo", "eval_drpo_search", "eval_untrained")


def check_stage(name: str | None) -> None:
    """``ValueError`` unless ``name`` is None or one of ``STAGE_NAMES``."""
    if name is not None and name not in STAGE_NAMES:
        raise ValueError(f"unknown stage {name!r}; choose from {', '.join(STAGE_NAMES)}")


def _stage(name: str) -> Callable[[ExperimentPlan, Path], None]:
    if name.startswith("eval_"):
        return _evaluate(name.removeprefix("eval_"))
    if name in ("drpo", "grpo"):
        return _rl(name)
    return {"programs": _programs, "tokenizer": _tokenizer, "untrained": _untrained,
            "pairs": _pairs, "sft": _sft}[name]


def run_experiment(plan: ExperimentPlan, say: Callable[[str], None] = print,
                   until: str | None = None) -> dict:
    """Run every stage not done yet, up to and including ``until`` (a ``STAGE_NAMES`` entry;
    None: all); returns the summary (also written to ``plan.results``)."""
    check_stage(until)
    out = _open_run(plan)
    names = STAGE_NAMES if until is None else STAGE_NAMES[:STAGE_NAMES.index(until) + 1]
    costs = _run_stages(plan, out, names, say)
    summary = summarize(plan, out, costs)
    text = json.dumps(summary, indent=1)
    (out / "summary.json").write_text(text)
    if has_evaluations(summary):  # a run prepared up to pairs leaves a committed summary alone
        results = Path(plan.results)
        results.mkdir(parents=True, exist_ok=True)
        (results / "summary.json").write_text(text)
    return summary


def _open_run(plan: ExperimentPlan) -> Path:
    """The plan's run directory, made if new, with the plan it runs written into it."""
    out = Path(plan.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "plan.json").write_text(json.dumps(asdict(plan), indent=1))
    return out


def _run_stages(plan: ExperimentPlan, out: Path, names, say: Callable[[str], None]) -> dict:
    """Run each of ``names`` not done yet, marking it done; returns every stage's wall time."""
    costs = _read_json(out / "stage_costs.json") or {}
    for name in names:
        if (out / f"{name}.done").exists():
            continue
        say(f"stage {name}")
        started = time.perf_counter()
        _stage(name)(plan, out)
        costs[name] = round(time.perf_counter() - started, 3)
        (out / "stage_costs.json").write_text(json.dumps(costs, indent=1))
        (out / f"{name}.done").write_text("")
    return costs


def prepare_experiment(plan: ExperimentPlan, target: str, say: Callable[[str], None] = print,
                       progress=None, on_skip=None) -> dict:
    """Run on this machine what needs no ``target`` device, ahead of a run there: programs,
    tokenizer, the untrained model, and the pairs outside the verified sample, written for
    ``target`` and left unjudged. The ``pairs`` stage stays open, so the run on ``target``,
    resuming, compiles and judges only the sample; the untrained model's evaluation is its.
    Returns the pair counts so far (``progress`` and ``on_skip``: ``run_pairs``'s callbacks)."""
    from drtriton.train.pairs import run_pairs

    out = _open_run(plan)
    _run_stages(plan, out, ("programs", "tokenizer", "untrained"), say)
    if (out / "pairs.done").exists():
        return _read_json(out / "pairs_counts.json") or {}
    say(f"pairs for {target}, unjudged")
    config = _pairs_config(plan, out, target=target, unjudged_only=True)
    return run_pairs(config, progress, on_skip)


def has_evaluations(summary: dict) -> bool:
    """Whether any stage of ``summary`` was evaluated on held-out programs."""
    return any(m["n"] for stages in summary["levels"].values() for m in stages.values())


def _programs(plan: ExperimentPlan, out: Path) -> None:
    from drtriton.bench import HELD_OUT_SEED

    train, held_out = out / "train_programs.jsonl", out / "eval_programs.jsonl"
    _program_file(plan.train_programs, train, plan.train_levels, plan.train_programs_per_level,
                  plan.train_seed, plan.scale)
    _program_file(plan.eval_programs, held_out, plan.eval_levels, plan.eval_programs_per_level,
                  HELD_OUT_SEED, plan.scale)
    counts = decontaminate(train, held_out)
    (out / "programs_counts.json").write_text(json.dumps(counts, indent=1))


def decontaminate(train: Path, held_out: Path) -> dict:
    """Drop from ``train`` every program whose id (its source's hash) is a held-out program's,
    and repeats: a small level has few distinct programs, so seeds collide."""
    held = {json.loads(line)["id"] for line in held_out.read_text().splitlines() if line.strip()}
    kept, seen, dropped = [], set(), {"held_out": 0, "repeated": 0}
    for line in train.read_text().splitlines():
        if not line.strip():
            continue
        record_id = json.loads(line)["id"]
        if record_id in held or record_id in seen:
            dropped["held_out" if record_id in held else "repeated"] += 1
            continue
        seen.add(record_id)
        kept.append(line)
    train.write_text("".join(line + "\n" for line in kept))
    return {"train": len(kept), "held_out": len(held), "dropped": dropped}


def _program_file(given: str, path: Path, levels, num: int, seed: int, scale: str) -> None:
    """The plan's file, else a sample drawn as the benchmark draws its own (spread over the
    level-1 and level-2 sweeps)."""
    if given:
        shutil.copyfile(given, path)
        return
    from drtriton.bench import BenchConfig
    from drtriton.bench.problems import synthetic_problems
    from drtriton.synth.programs import write_jsonl

    sample = BenchConfig(levels=tuple(levels), num=num, seed=seed, scale=scale)
    write_jsonl([p.record for p in synthetic_problems(sample)], path)


def _tokenizer(plan: ExperimentPlan, out: Path) -> None:
    from drtriton.train.model import train_tokenizer

    train_tokenizer(out / "tokenizer", plan.vocab_size, [out / "train_programs.jsonl"],
                    plan.split_digits)


def _untrained(plan: ExperimentPlan, out: Path) -> None:
    from drtriton.train.model import init_model

    init_model(out / "untrained", plan.preset, plan.seed, out / "tokenizer")


def _pairs(plan: ExperimentPlan, out: Path) -> None:
    from drtriton.train.pairs import run_pairs

    counts = run_pairs(_pairs_config(plan, out))
    (out / "pairs_counts.json").write_text(json.dumps(counts, indent=1))


def _pairs_config(plan: ExperimentPlan, out: Path, **overrides):
    """The plan's ``PairsConfig`` (the GPU's stage and the CPU's preparation share it)."""
    from drtriton.train.pairs import PairsConfig

    return PairsConfig(str(out / "train_programs.jsonl"), str(out / "pairs.jsonl"),
                       variants=plan.variants, device=plan.device,
                       judge_workers=plan.judge_workers,
                       timing_budget_s=plan.pairs_timing_budget_s,
                       verify_fraction=plan.pairs_verify_fraction,
                       shape_notes=plan.pairs_shape_notes,
                       unsafe_no_sandbox=plan.unsafe_no_sandbox, **overrides)


def _sft(plan: ExperimentPlan, out: Path) -> None:
    from drtriton.train.sft import SFTRunConfig, run_sft

    run_sft(SFTRunConfig(str(out / "untrained"), str(out / "pairs.jsonl"), str(out / "sft"),
                         max_steps=plan.sft_steps, batch_size=plan.sft_batch_size,
                         lr=plan.sft_lr, max_length=plan.sft_max_length, seed=plan.seed,
                         fp32_weights=plan.sft_fp32_weights, save_steps=plan.sft_save_steps))


def _rl(objective: str) -> Callable[[ExperimentPlan, Path], None]:
    def stage(plan: ExperimentPlan, out: Path) -> None:
        from drtriton.train.rl import RLConfig, has_checkpoint, run_rl

        folder = out / objective
        run_rl(RLConfig(str(out / "sft"), str(out / "train_programs.jsonl"), str(folder),
                        max_steps=plan.rl_steps, programs_per_step=plan.rl_programs_per_step,
                        n=plan.rl_n, objective=objective, lr=plan.rl_lr,
                        levels=plan.rl_levels, max_new_tokens=plan.max_new_tokens,
                        temperature=plan.temperature, device=plan.device,
                        mini_batches=min(2, plan.rl_programs_per_step),
                        judge_workers=plan.judge_workers, seed=plan.seed,
                        unsafe_no_sandbox=plan.unsafe_no_sandbox,
                        resume=has_checkpoint(folder)))

    return stage


def _model_of(stage: str, out: Path) -> Path:
    return {"untrained": out / "untrained", "sft": out / "sft",
            "drpo": out / "drpo" / "checkpoint", "grpo": out / "grpo" / "checkpoint",
            "drpo_search": out / "drpo" / "checkpoint"}[stage]


def _evaluate(stage: str) -> Callable[[ExperimentPlan, Path], None]:
    def step(plan: ExperimentPlan, out: Path) -> None:
        from drtriton.bench import BenchConfig, run_bench

        search = stage.endswith("_search")  # samples many answers: the RL temperature
        config = BenchConfig(levels=plan.eval_levels, num=plan.eval_programs_per_level,
                             scale=plan.scale, programs=str(out / "eval_programs.jsonl"),
                             policy=f"hf:{_model_of(stage, out)}", device=plan.device,
                             search=search, search_with_compiler=False,
                             search_wall_s=plan.search_wall_s,
                             temperature=plan.temperature if search else plan.eval_temperature,
                             max_new_tokens=plan.eval_max_new_tokens or plan.max_new_tokens,
                             generation_batch_size=plan.generation_batch_size,
                             timing_budget_s=plan.eval_timing_budget_s,
                             compile_baseline=plan.eval_compile_baseline,
                             unsafe_no_sandbox=plan.unsafe_no_sandbox)
        (out / "eval").mkdir(exist_ok=True)
        run_bench(config, out / "eval" / f"{stage}.json")

    return step


# ----------------------------------------------------------------------------- summary
def summarize(plan: ExperimentPlan, out: Path, costs: dict) -> dict:
    """Per level and stage: accuracy, mean speedup of correct answers, n; RL step costs."""
    from drtriton.provenance import machine_record

    levels: dict = {}
    for stage in STAGES:
        rows = _rows(out / "eval" / f"{stage}.json.rows.jsonl")
        for level in plan.eval_levels:
            mine = [r for r in rows if r.get("level") == level
                    and r.get("status") != "invalid_reference"]
            speedups = [r["speedup_eager"] for r in mine
                        if r["status"] == "correct" and r.get("speedup_eager")]
            levels.setdefault(str(level), {})[stage] = {
                "accuracy": sum(r["status"] == "correct" for r in mine) / len(mine)
                if mine else None,
                "mean_speedup_correct": sum(speedups) / len(speedups) if speedups else None,
                "n": len(mine),
            }
    return {"plan": plan.name, "levels": levels, "rl_step_costs_s": _rl_costs(out),
            "stage_wall_s": costs, "pairs": _read_json(out / "pairs_counts.json"),
            "sft": _sft_record(out), "programs": _read_json(out / "programs_counts.json"),
            "environment": machine_record()}


def _sft_record(out: Path) -> dict | None:
    """SFT's steps, epochs, first and last logged loss and runtime (its trainer's log)."""
    rows = _rows(out / "sft" / "sft_metrics.jsonl")
    steps = [r for r in rows if "loss" in r]
    if not steps:
        return None
    final = next((r for r in reversed(rows) if "train_runtime" in r), {})
    return {"steps": steps[-1].get("step"), "epochs": steps[-1].get("epoch"),
            "first_loss": steps[0]["loss"], "last_loss": steps[-1]["loss"],
            "train_runtime_s": final.get("train_runtime")}


def _rl_costs(out: Path) -> dict:
    found = {}
    for objective in ("drpo", "grpo"):
        rows = _rows(out / objective / "metrics.jsonl")
        if rows:
            found[objective] = {
                key: round(sum(r.get(key, 0.0) for r in rows) / len(rows), 3)
                for key in ("time_generate_s", "time_judge_s", "time_update_s", "time_step_s")
            } | {"steps": len(rows),
                 "correct_rate": [round(r["correct_rate"], 4) for r in rows]}
    return found


def _rows(path: Path) -> list[dict]:
    from drtriton.bench.rows import load_rows

    return load_rows(path)[0]  # a row cut short by a killed run is left out


def _read_json(path: Path) -> dict | None:
    return json.loads(path.read_text()) if path.exists() else None
