"""The ``drtriton`` command (typer). Each stage's heavy imports stay inside its command.

Run ``drtriton --help`` for the list of commands.
"""

from __future__ import annotations

import os
import time
from collections import Counter
from pathlib import Path

import typer
from rich.console import Console

app = typer.Typer(
    help="Turn PyTorch programs into fast, verified Triton kernels.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)
console = Console(stderr=True)


def fail(message: str, code: int = 2) -> None:
    """One clear line on stderr and a non-zero exit, never a traceback."""
    console.print(f"[bold red]error:[/] {message}", highlight=False)
    raise typer.Exit(code)


def _check_writable(path: Path) -> None:
    parent = path.parent if str(path.parent) else Path(".")
    try:
        parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        fail(f"cannot create directory {parent}: {exc.strerror}")
    if path.is_dir():
        fail(f"{path} is a directory; give a file path")
    if not os.access(parent, os.W_OK) or (path.exists() and not os.access(path, os.W_OK)):
        fail(f"cannot write {path}: permission denied")


@app.command()
def synth(
    level: int = typer.Option(..., help="Number of operators per program (1, 2, 5, 20, ...)."),
    num: int = typer.Option(..., help="Number of programs."),
    out: Path = typer.Option(..., help="Output JSONL file (one program record a line)."),
    seed: int = typer.Option(0, help="Run seed; the same seed gives the same bytes."),
    scale: str = typer.Option("small", help="gpu (2^34..2^35 FLOPs) or small (CPU interpreter sizes)."),
    workers: int = typer.Option(1, help="Parallel worker processes."),
    check: str = typer.Option("auto", help="run | meta | none (auto: run unless gpu scale on a CPU)."),
    device: str = typer.Option("cpu", help="Device on which programs are run by the check."),
    start_index: int = typer.Option(0, help="First program index (to resume or shard a run)."),
) -> None:
    """Synthesize KernelBench-format PyTorch programs with CP-SAT (CSP-DAG)."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from drtriton.synth import SynthConfig, SynthError, iter_synthesize

    config = SynthConfig(level, num, seed, scale, workers, check, device, start_index=start_index)
    try:
        config.validate()
    except SynthError as exc:
        fail(str(exc))
    _check_writable(out)
    import torch

    torch.set_num_threads(1)  # many tiny programs: threads only add overhead
    rejected: Counter[str] = Counter()
    started = time.perf_counter()
    tmp = out.with_name(out.name + ".partial")
    columns = (TextColumn("synth L{task.fields[level]}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    try:
        # Records stream to a .partial file as they arrive; an interrupted run keeps them (resume
        # with --start-index), and the final name appears only when the run is complete.
        with tmp.open("w") as f, Progress(*columns, console=console) as progress:
            task = progress.add_task("synth", total=num, level=level)
            for result in iter_synthesize(config):
                f.write(result.program.to_json() + "\n")
                f.flush()
                rejected.update(result.rejected)
                progress.advance(task)
    except SynthError as exc:
        fail(f"{exc} (the {tmp.name} file keeps the programs made so far)")
    tmp.replace(out)
    elapsed = time.perf_counter() - started
    reasons = ", ".join(f"{k}={v}" for k, v in sorted(rejected.items())) or "none"
    console.print(
        f"wrote {num} level-{level} programs ({scale} scale) to {out} in {elapsed:.1f} s "
        f"({num / elapsed:.1f} programs/s); rejected draws replaced: {sum(rejected.values())} ({reasons})"
    )


@app.command()
def ops() -> None:
    """List the operator catalogue."""
    from rich.table import Table

    from drtriton.ops import OPS

    table = Table("name", "category", "arity", "ranks", "PyTorch")
    for op in OPS:
        table.add_row(op.name, op.category, str(op.arity), ",".join(map(str, op.ranks)), op.torch_fn)
    Console().print(table)
    Console().print(f"{len(OPS)} operators")


@app.command()
def convert(
    program: Path = typer.Argument(..., help="KernelBench-format PyTorch program (.py)."),
    out: Path = typer.Option(None, "-o", "--out", help="Candidate file (default: PROGRAM_triton.py)."),
    device: str = typer.Option("auto", help="auto | cpu (Triton interpreter) | cuda."),
    mode: str = typer.Option("strict", help="strict (all compute in Triton) | hybrid (conv/matmul may use torch)."),
) -> None:
    """Compile a program to Triton with the built-in compiler and verify it with the judge."""
    from drtriton.compiler.convert import convert as run_convert

    if mode not in ("strict", "hybrid"):
        fail(f"--mode must be strict or hybrid, got {mode!r}")
    code = run_convert(str(program), str(out) if out else None, device, mode,
                       echo=lambda m: console.print(m, highlight=False, markup=False))
    raise typer.Exit(code)


if __name__ == "__main__":
    app()
