"""The bodies of the training commands (``drtriton tokenizer | init-model | pairs | sft | rl |
learn``).

``cli.py`` declares the options and calls these; each returns its result line (the CLI prints
it on stdout) or raises ``UsageError`` with one line for the user (the CLI prints it and exits
2). The console they are given is for diagnostics: progress and skipped programs.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from drtriton.devices import is_device_name


class UsageError(ValueError):
    """Bad input: the CLI shows the message on one line and exits with status 2."""


def _need_file(path: Path, what: str) -> None:
    if not path.is_file():
        raise UsageError(f"{what} {path} does not exist or is not a file")


def _need_model(path: Path) -> None:
    if not (path / "config.json").is_file():
        raise UsageError(
            f"{path} is not a model directory (no config.json); see drtriton init-model")


def _check_device(device: str) -> None:
    import torch

    if not is_device_name(device):
        raise UsageError(f"--device must be auto, cpu, cuda or cuda:N, got {device!r}")
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise UsageError(f"--device {device} requested but no CUDA GPU is visible")


def tokenizer_command(out: Path, corpus: list[Path], vocab_size: int, split_digits: bool,
                      console: Console) -> str:
    from drtriton.train.model import train_tokenizer

    for path in corpus:
        _need_file(path, "corpus file")
    if out.exists() and not out.is_dir():
        raise UsageError(f"{out} exists and is not a directory")
    try:
        path = train_tokenizer(out, vocab_size, corpus, split_digits)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    return f"wrote a {vocab_size}-token BPE tokenizer ({len(corpus)} corpus files) to {path}"


def init_model_command(preset: str, out: Path, seed: int, tokenizer_dir: Path | None,
                       console: Console) -> str:
    from drtriton.train.model import PRESETS, init_model

    if preset not in PRESETS:
        raise UsageError(f"unknown preset {preset!r}; choose from {', '.join(PRESETS)}")
    if out.exists() and not out.is_dir():
        raise UsageError(f"{out} exists and is not a directory")
    if tokenizer_dir is not None and not (tokenizer_dir / "tokenizer.json").is_file():
        raise UsageError(f"{tokenizer_dir} holds no tokenizer.json; see drtriton tokenizer")
    path = init_model(out, preset, seed, tokenizer_dir)
    return f"wrote a random {preset} Qwen2 model and its tokenizer to {path}"


@contextmanager
def _pairs_progress(console: Console) -> Iterator[tuple[Callable, Callable]]:
    """A progress bar over programs: ``run_pairs``'s ``progress`` and ``on_skip`` callbacks."""
    columns = (TextColumn("pairs"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    with Progress(*columns, console=console) as progress:
        task = progress.add_task("pairs", total=None)

        def advance(done: int, total: int) -> None:
            progress.update(task, completed=done, total=total)

        def skip(program_id: str, reason: str) -> None:
            progress.console.print(f"skipped program {program_id}: {reason}")

        yield advance, skip


def pairs_command(config, console: Console) -> str:
    from drtriton.train.pairs import run_pairs

    _need_file(Path(config.programs), "programs file")
    _check_device(config.device)
    try:
        config.validate()
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    with _pairs_progress(console) as (advance, skip):
        try:
            counts = run_pairs(config, advance, skip)
        except ValueError as exc:
            raise UsageError(str(exc)) from None
    detail = ", ".join(f"{k}={v}" for k, v in sorted(counts.items()))
    pairs, unjudged = counts.get("pairs", 0), counts.get("unverified", 0)
    if counts.get("left_to_judge"):
        return (f"wrote {pairs} unjudged pairs to {config.out}; the judged sample's "
                f"{counts['left_to_judge']} programs are left for a run on "
                f"{config.target or config.device} ({detail})")
    if unjudged:
        return (f"wrote {pairs} pairs, {pairs - unjudged} of them verified, to {config.out} "
                f"({detail})")
    return f"wrote {pairs} verified pairs to {config.out} ({detail})"


def sft_command(config, console: Console) -> str:
    from drtriton.train.sft import read_pairs, run_sft

    _need_model(Path(config.model))
    _need_file(Path(config.pairs), "pairs file")
    try:
        read_pairs(config.pairs)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    metrics = run_sft(config)
    loss = metrics.get("train_loss")
    return f"saved the SFT model to {config.out} (train_loss={loss})"


def rl_command(config, console: Console) -> str:
    from drtriton.train.pairs import read_programs
    from drtriton.train.rl import run_rl

    _need_model(Path(config.model))
    _need_file(Path(config.programs), "programs file")
    _check_device(config.device)
    try:
        config.validate()
        read_programs(config.programs)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    columns = (
        TextColumn("rl"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
        TextColumn("{task.fields[info]}", markup=False),
    )
    with Progress(*columns, console=console) as progress:
        task = progress.add_task("rl", total=config.max_steps, info="")

        def on_step(m: dict) -> None:
            info = (
                f"L{m['level']} loss={_fmt(m['loss'])} kl={_fmt(m['kl'])} "
                f"correct={m['correct_rate']:.2f} signal={m['frac_groups_with_signal']:.2f}"
            )
            progress.update(task, completed=m["step"], info=info)

        try:
            rows = run_rl(config, on_step)
        except ValueError as exc:
            raise UsageError(str(exc)) from None
    last = rows[-1]["step"] if rows else "none"
    return (f"RL done (last step {last}); metrics in {config.out}/metrics.jsonl, "
            f"checkpoint in {config.out}/checkpoint")


def _fmt(x: float | None) -> str:
    return "nan" if x is None or not math.isfinite(x) else f"{x:.4g}"


def learn_command(plan_path: Path, until: str | None, prepare_for: str | None,
                  console: Console) -> str:
    from drtriton.train.experiment import (
        STAGES,
        check_stage,
        has_evaluations,
        load_experiment,
        prepare_experiment,
        run_experiment,
    )

    _need_file(plan_path, "plan file")
    try:
        check_stage(until)
    except ValueError as exc:
        raise UsageError(f"--until: {exc}") from None
    if prepare_for is not None and until is not None:
        raise UsageError("--prepare-for and --until exclude each other")
    if prepare_for not in (None, "cpu", "cuda"):
        raise UsageError("--prepare-for takes cpu or cuda")
    try:
        plan = load_experiment(plan_path)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    say = lambda line: console.print(line)  # noqa: E731
    if prepare_for is not None:
        with _pairs_progress(console) as (advance, skip):
            counts = prepare_experiment(plan, prepare_for, say, advance, skip)
        return (f"{plan.out} prepared for {prepare_for}: {counts.get('pairs', 0)} unjudged "
                f"pairs, {counts.get('left_to_judge', 0)} programs left to judge there")
    summary = run_experiment(plan, say, until)
    lines = []
    for level, stages in summary["levels"].items():
        shown = ", ".join(f"{s} {_fmt_rate(stages[s]['accuracy'])}" for s in STAGES)
        lines.append(f"L{level}: {shown}")
    where = plan.results if has_evaluations(summary) else plan.out  # results: evaluated runs
    return f"summary in {where}/summary.json; accuracy " + "; ".join(lines)


def _fmt_rate(x: float | None) -> str:
    return "-" if x is None else f"{x:.2f}"
