"""The ``drtriton`` command (typer). Each stage's heavy imports stay inside its command.

Run ``drtriton --help`` for the list of commands.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import shutil
import sys
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, NoReturn

import typer
from rich.console import Console
from rich.text import Text
from typer.core import TyperGroup

from drtriton.synth.programs import MAX_LEVEL

if TYPE_CHECKING:
    from drtriton.bench import BenchConfig
    from drtriton.synth import SynthConfig

try:  # recent typer vendors its own click; older versions use the click package
    from typer._click import exceptions as click_errors
except ImportError:  # pragma: no cover
    from click import exceptions as click_errors


class _OneLineErrors(TyperGroup):
    """A bad option value ends like every other error: one plain line on stderr and exit 2
    (typer's boxed panel spreads one error over several lines, wrapped at 80 columns)."""

    def main(self, *args: Any, standalone_mode: bool = True, **kwargs: Any) -> Any:
        if not standalone_mode:
            return super().main(*args, standalone_mode=False, **kwargs)
        try:
            code = super().main(*args, standalone_mode=False, **kwargs)
        except click_errors.NoArgsIsHelpError as exc:
            exc.show()
            sys.exit(exc.exit_code)
        except click_errors.ClickException as exc:
            _line("error:", exc.format_message())
            sys.exit(exc.exit_code)
        except typer.Abort:
            _line("error:", "aborted")
            sys.exit(1)
        sys.exit(code if isinstance(code, int) else 0)


app = typer.Typer(
    cls=_OneLineErrors,
    help="Turn PyTorch programs into fast, verified Triton kernels.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)
# Diagnostics (progress, notes, errors) go to stderr, results to stdout. Messages carry paths and
# library errors ("x[/]y.py", "[enforce fail at ...]"): never read as markup, never wrapped (a
# log or a pipe gets one line per message, whatever its width).
console = Console(stderr=True, markup=False, highlight=False, soft_wrap=True)


def _line(label: str, message: str, style: str = "bold red") -> None:
    text = Text(label, style=style)
    text.append(" " + " ".join(message.splitlines()))
    console.print(text)


def fail(message: str, code: int = 2) -> NoReturn:
    """One clear line on stderr and a non-zero exit, never a traceback."""
    _line("error:", message)
    raise typer.Exit(code)


def warn(message: str) -> None:
    """One line on stderr that the run goes on from."""
    _line("warning:", message, "yellow")


def result(message: str) -> None:
    """A result line on stdout."""
    typer.echo(message)


def _progress(label: str, *fields: str):
    """A progress bar on stderr: ``label``, the bar, done/total, time, then the task fields
    named in ``fields``; every text plain (a problem id is no markup, nor a format string).
    Transient: it leaves no line behind, so that an error stays the last line; and a log (not
    a terminal) gets no bar at all."""
    from rich import progress as bars

    literal = label.replace("{", "{{").replace("}", "}}")
    columns = [bars.TextColumn(literal, markup=False), bars.BarColumn(),
               bars.MofNCompleteColumn(), bars.TimeElapsedColumn()]
    columns += [bars.TextColumn(f"{{task.fields[{name}]}}", markup=False) for name in fields]
    return bars.Progress(*columns, console=console, transient=True,
                         disable=not console.is_terminal)


# ----------------------------------------------------------------------------- input checks
def _check_writable(path: Path) -> None:
    """Fail unless ``path`` can be written as a file. Checked before any work; creates nothing."""
    if path.is_dir():
        fail(f"{path} is a directory; give a file path")
    _check_creatable(path.parent)
    if path.exists() and not os.access(path, os.W_OK):
        fail(f"cannot write {path}: permission denied")


def _check_out_dir(path: Path) -> None:
    """Fail unless ``path`` is, or can be created as, a writable directory; creates nothing."""
    if path.exists() and not path.is_dir():
        fail(f"{path} exists and is not a directory")
    _check_creatable(path)


def _check_creatable(folder: Path) -> None:
    existing = folder.absolute()
    while not existing.exists():  # the nearest ancestor decides
        existing = existing.parent
    if not existing.is_dir():
        fail(f"cannot create directory {folder}: {existing} is not a directory")
    if not os.access(existing, os.W_OK | os.X_OK):
        fail(f"cannot write in {existing}: permission denied")


def _check_readable(path: Path, what: str) -> None:
    if path.is_dir():
        fail(f"{what} {path} is a directory; give a file")
    if not path.is_file():
        fail(f"{what} {path} does not exist")
    if not os.access(path, os.R_OK):
        fail(f"cannot read {what} {path}: permission denied")


def _check_device(device: str) -> None:
    """A CUDA device needs a visible GPU: refused now, before any work or any file."""
    if device.startswith("cuda"):
        import torch

        if not torch.cuda.is_available():
            fail(f"--device {device}: no CUDA GPU is visible here; use --device cpu")


@app.command()
def synth(
    level: int = typer.Option(..., help=f"Operators per program, 1..{MAX_LEVEL}."),
    num: int = typer.Option(..., min=1, help="Number of programs (at least 1)."),
    out: Path = typer.Option(..., help="Output JSONL file (one program record a line)."),
    seed: int = typer.Option(0, help="Run seed; the same seed gives the same bytes."),
    scale: str = typer.Option(
        "small", help="gpu (2^34..2^35 FLOPs) or small (CPU interpreter sizes)."),
    workers: int = typer.Option(1, min=1, help="Parallel worker processes."),
    check: str = typer.Option(
        "auto", help="run | meta | none (auto: run unless gpu scale on a CPU)."),
    device: str = typer.Option(
        "cpu", help="Where the check runs programs: cpu, cuda or cuda:N (needs a GPU)."),
    start_index: int = typer.Option(
        0, min=0, help="First program index, 0 or more (to shard a run)."),
) -> None:
    """Synthesize KernelBench-format PyTorch programs with CP-SAT (CSP-DAG).

    An interrupted run keeps its programs in OUT.partial: the same command, run
    again, goes on from there and writes what an uninterrupted run writes."""
    from drtriton.synth import SynthConfig, SynthError

    config = SynthConfig(level, num, seed, scale, workers, check, device, start_index=start_index)
    try:
        config.validate()
    except SynthError as exc:
        fail(str(exc))
    _check_device(device)
    _check_writable(out)
    import torch

    torch.set_num_threads(1)  # many tiny programs: threads only add overhead
    started = time.perf_counter()
    tmp = out.with_name(out.name + ".partial")
    kept = _resume_partial(tmp, config)
    rejected = _synthesize_into(tmp, config, kept)
    tmp.replace(out)  # the final name appears only when the run is complete
    elapsed = time.perf_counter() - started
    reasons = ", ".join(f"{k}={v}" for k, v in sorted(rejected.items())) or "none"
    rate = (num - kept) / max(elapsed, 1e-9)
    result(f"wrote {num} level-{level} programs ({scale} scale) to {out} in {elapsed:.1f} s "
           f"({rate:.1f} programs/s); rejected draws replaced: "
           f"{sum(rejected.values())} ({reasons})")


def _resume_partial(tmp: Path, config: SynthConfig) -> int:
    """Programs an interrupted run of this command left in ``tmp``, kept; a line cut short by
    the interruption is cut off, so the file holds exactly the first programs of the run."""
    from drtriton.synth.programs import SynthError, finished_prefix

    if not tmp.exists():
        return 0
    try:
        kept, size = finished_prefix(tmp, config)
        with tmp.open("r+b") as f:
            f.truncate(size)
    except SynthError as exc:
        fail(str(exc))
    except OSError as exc:
        fail(f"cannot resume from {tmp}: {exc.strerror or exc}")
    console.print(f"resuming: {kept} of {config.num} programs already in {tmp}")
    return kept


def _synthesize_into(tmp: Path, config: SynthConfig, kept: int) -> Counter[str]:
    """Append programs ``kept..num-1`` of the run to ``tmp`` as they arrive (each line flushed:
    a killed run keeps every finished program); the counts of rejected draws by reason."""
    from drtriton.synth import SynthError, iter_synthesize

    rejected: Counter[str] = Counter()
    if kept == config.num:
        return rejected
    rest = dataclasses.replace(config, start_index=config.start_index + kept,
                               num=config.num - kept)
    tmp.parent.mkdir(parents=True, exist_ok=True)
    try:
        with tmp.open("a") as f, _progress(f"synth L{config.level}") as progress:
            task = progress.add_task("synth", total=config.num, completed=kept)
            for one in iter_synthesize(rest):
                f.write(one.program.to_json() + "\n")
                f.flush()
                rejected.update(one.rejected)
                progress.advance(task)
    except SynthError as exc:
        fail(f"{exc} ({tmp} keeps the programs made so far; run the same command again to go "
             "on from there)")
    return rejected


@app.command()
def ops(
    coverage: bool = typer.Option(
        False, "--coverage",
        help="Instead: what the compiler converts (nn modules, nn.functional, torch functions, "
             "tensor methods, ATen ops), read from its lowering tables."),
    status: str = typer.Option(
        None, help="With --coverage, only rows of this status: lowered | view | traced | "
                   "decomposed | unsupported."),
) -> None:
    """List the operator catalogue (the synthesizer's 61 operators), or the compiler's coverage."""
    from rich.table import Table

    if coverage:
        _print_coverage(status)
        return
    if status is not None:
        fail("--status applies only with --coverage")
    from drtriton.ops import OPS

    table = Table("name", "category", "arity", "ranks", "PyTorch")
    for op in OPS:
        table.add_row(
            op.name, op.category, str(op.arity), ",".join(map(str, op.ranks)), op.torch_fn
        )
    stdout = Console(markup=False, highlight=False)
    stdout.print(table)
    stdout.print(f"{len(OPS)} operators")


def _print_coverage(status: str | None) -> None:
    from rich.table import Table

    from drtriton.compiler.coverage import STATUSES, counts, coverage

    if status is not None and status not in STATUSES:
        fail(f"--status must be one of {', '.join(STATUSES)}, got {status!r}")
    rows = coverage()
    stdout = Console(markup=False, highlight=False)
    table = Table("kind", "name", "status")
    for row in rows:
        if status is None or row.status == status:
            table.add_row(row.kind, row.name, row.status)
    stdout.print(table)
    for kind, by_status in counts(rows).items():
        shown = ", ".join(f"{n} {s}" for s, n in by_status.items() if n)
        stdout.print(f"{kind}: {shown}")


TIMEOUT_HELP = ("Wall-clock limit (seconds) of each candidate child process: the one that runs "
                "all its correctness trials, and on a GPU the one that times it.")
DEVICES_HELP = "auto (a GPU when one is visible) | cpu (Triton interpreter) | cuda."
Mode = Literal["strict", "hybrid"]


@app.command()
def convert(
    program: Path = typer.Argument(..., help="KernelBench-format PyTorch program (.py)."),
    out: Path = typer.Option(
        None, "-o", "--out", help="Candidate file (default: PROGRAM_triton.py)."
    ),
    device: Literal["auto", "cpu", "cuda"] = typer.Option("auto", help=DEVICES_HELP),
    mode: Mode = typer.Option(
        "strict", help="strict (all compute in Triton) | hybrid (conv/matmul may use torch)."
    ),
    preset: str = typer.Option(
        "hardened",
        help=(
            "Judge preset: hardened (fp32 accuracy; GPU products as 3xTF32) | kernelbench | "
            "kernelbench-v0.1 | tf32 (TF32 products, baselines with TF32)."
        ),
    ),
    capture: Literal["auto", "fx", "export"] = typer.Option(
        "auto",
        help=(
            "How the forward becomes a graph: fx (torch.fx tracing) | export (torch.export, "
            "ATen ops, modules decomposed) | auto (fx, then export where fx cannot)."
        ),
    ),
    search: bool = typer.Option(
        False, "--search", help="Test-time fragment search (verify and time per fragment)."
    ),
    max_fragment_ops: int = typer.Option(4, help="With --search: largest fragment (operators)."),
    search_wall_s: float = typer.Option(
        600.0,
        help=(
            "With --search: its wall-time budget (seconds); a fragment range starts only if it and "
            "the composed program's verdict still fit."
        ),
    ),
    candidates_per_fragment: int = typer.Option(
        4, help="With --search: candidates judged per fragment at most."
    ),
    search_cache: Path = typer.Option(
        None, help="With --search: SQLite verdict cache reused across runs (default: none)."
    ),
    timeout_s: float = typer.Option(120.0, "--timeout-s", help=TIMEOUT_HELP),
    reference_timeout_s: float = typer.Option(
        300.0,
        "--reference-timeout-s",
        help=(
            "Wall-clock limit of the program's own runs (the compiler's capture, the reference "
            "run)."
        ),
    ),
    unsafe_no_sandbox: bool = typer.Option(
        False,
        "--unsafe-no-sandbox",
        help=(
            "Run the program and its candidate without OS isolation when bubblewrap is unavailable."
        ),
    ),
) -> None:
    """Compile a program to Triton with the built-in compiler and verify it with the judge.

    The candidate is written once the judge has a verdict on it (exit 0: correct,
    1: not correct); a program that cannot be compiled or run leaves no file (2)."""
    from drtriton.commands import convert as run_convert
    from drtriton.scratch import scratch_dir

    _check_readable(program, "program")
    target = out or program.with_name(program.stem + "_triton.py")
    _check_writable(target)
    _check_device(device)
    _check_search_budget(max_fragment_ops, search_wall_s, candidates_per_fragment)
    if timeout_s <= 0 or reference_timeout_s <= 0:
        fail("--timeout-s and --reference-timeout-s must be positive")
    budget = {"max_fragment_ops": max_fragment_ops, "wall_time_s": search_wall_s,
              "candidates_per_fragment": candidates_per_fragment,
              "cache_path": str(search_cache) if search_cache else None}
    judge_options = {"timeout_s": timeout_s, "preset": preset,
                     "reference_timeout_s": reference_timeout_s,
                     "unsafe_no_sandbox": unsafe_no_sandbox}
    # the candidate is staged where a killed run's leftovers are cleaned by the next run
    with scratch_dir(None, "drtriton-convert-") as folder:
        staged = Path(folder) / target.name
        messages = _ConvertMessages(staged, target)
        with _search_status(search) as progress:
            code = run_convert(str(program), str(staged), device, mode, echo=messages.echo,
                               search=search, search_budget=budget, progress=progress,
                               judge_options=judge_options, capture=capture)
        verdict_reached = code in (0, 1)
        compiled = staged.exists()  # without a verdict: the program failed under the judge
        if verdict_reached and compiled:
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.move(staged, target)
    if not verdict_reached:
        fail(_convert_error(program, messages, compiled, device, judge_options))
    messages.print_results()
    raise typer.Exit(code)


@contextlib.contextmanager
def _search_status(search: bool):
    """A spinner that shows the search's steps (``progress`` for ``convert``), or None."""
    if not search or not console.is_terminal:  # a log gets no spinner (nor its blank line)
        yield None
        return
    with console.status(Text("search"), spinner="dots") as status:
        yield lambda m: status.update(Text(f"search: {m}"))


class _ConvertMessages:
    """``convert``'s messages, sorted: notes to stderr as they come; results (what was written,
    the verdict, speedups) to stdout at the end, naming the final file; errors held back, since
    the CLI may say better what went wrong."""

    def __init__(self, staged: Path, target: Path) -> None:
        self.staged, self.target = str(staged), str(target)
        self.results: list[str] = []
        self.errors: list[str] = []

    def echo(self, message: str) -> None:
        message = message.replace(self.staged, self.target)
        if message.startswith("error: "):
            self.errors.append(message.removeprefix("error: "))
        elif message.startswith(("note: ", "searching ")):
            console.print(message)
        else:
            self.results.extend(message.splitlines())

    def print_results(self) -> None:
        for line in self.results:
            result(line)


def _convert_error(program: Path, messages: _ConvertMessages, compiled: bool, device: str,
                   judge_options: dict) -> str:
    """The one line of a ``convert`` that reached no verdict. When the compile failed, the
    program is run once in a sandbox first: a program that fails on its own (inputs of the
    wrong type, inputs too large, a forward that raises) is named so, not as an operator the
    compiler cannot lower."""
    error = messages.errors[-1] if messages.errors else "convert failed"
    if compiled:
        return f"{error} (no candidate written: it could not be verified)"
    problem = _program_problem(program.read_text(), device, judge_options)
    return f"{program}: {problem}" if problem else error


def _program_problem(source: str, device: str, judge_options: dict) -> str | None:
    """What fails when the program runs alone in a sandbox; None when it runs, or when no
    sandbox can be had to find out (the compiler's own message stands then)."""
    from drtriton.devices import device_kind, resolve_device
    from drtriton.judge import JudgeConfig, JudgePool, SandboxUnavailable
    from drtriton.program import ProgramError

    kind = device_kind(resolve_device(device))
    try:
        config = JudgeConfig(device=kind, jobs_per_gpu=1, **judge_options)
        with JudgePool(config, workers=1) as pool:
            found = pool.call(source, "drtriton.program:check_runs", {"device": kind},
                              phase="program check")
    except ProgramError as exc:  # the sandbox stopped it: memory limit, time limit
        return str(exc)
    except (SandboxUnavailable, ValueError):
        return None
    return found.get("problem")


def _check_search_budget(max_fragment_ops: int, search_wall_s: float,
                         candidates_per_fragment: int) -> None:
    if max_fragment_ops < 1 or candidates_per_fragment < 1:
        fail("--max-fragment-ops and --candidates-per-fragment must be at least 1")
    if search_wall_s <= 0:
        fail("--search-wall-s must be positive")


POLICY_HELP = ("The policy: compiler (the built-in compiler) | hf:MODEL_DIR (a local checkpoint) "
               "| openai:BASE_URL#MODEL (an OpenAI-compatible endpoint, key in OPENAI_API_KEY).")
UNSAFE_HELP = ("Run untrusted code without OS isolation when bubblewrap is unavailable "
               "(recorded in every verdict).")


@app.command()
def verify(
    reference: Path = typer.Argument(..., help="KernelBench-format reference program (.py)."),
    candidates: list[Path] = typer.Argument(
        ...,
        help=(
            "Candidate programs defining ModelNew (.py); several are judged as one group."
        ),
    ),
    device: str = typer.Option("auto", help="auto | cpu (Triton interpreter) | cuda | cuda:N."),
    preset: str = typer.Option(
        "hardened",
        help=(
            "hardened | kernelbench | kernelbench-v0.1 | tf32 "
            "(PyTorch and its baselines with TF32)."
        ),
    ),
    mode: Mode = typer.Option("strict", help="strict | hybrid (conv/matmul may use torch)."),
    timeout_s: float = typer.Option(120.0, "--timeout-s", help=TIMEOUT_HELP),
    reference_timeout_s: float = typer.Option(
        300.0,
        "--reference-timeout-s",
        help=(
            "Wall-clock limit of the reference's own run (import, get_inputs, forward)."
        ),
    ),
    fresh_baselines: bool = typer.Option(
        False,
        "--fresh-baselines",
        help=(
            "Re-measure eager and torch.compile instead of using the on-disk baseline cache."
        ),
    ),
    unsafe_no_sandbox: bool = typer.Option(False, "--unsafe-no-sandbox", help=UNSAFE_HELP),
    json_out: bool = typer.Option(
        False,
        "--json",
        help=(
            "Print one JSON object per candidate instead of a summary."
        ),
    ),
) -> None:
    """Judge candidates against a reference (exit 0 only if every verdict is correct)."""
    from drtriton.judge import JudgeConfig, SandboxUnavailable, verify_group
    from drtriton.judge import verify as run_verify
    from drtriton.program import ProgramError

    _check_device(device)
    sources = []
    for path in (reference, *candidates):
        _check_readable(path, "program")
        try:
            sources.append(path.read_text())
        except (OSError, UnicodeDecodeError) as exc:
            fail(f"cannot read {path}: {exc}")
    try:
        config = JudgeConfig(
            preset=preset, mode=mode, device=device, timeout_s=timeout_s,
            reference_timeout_s=reference_timeout_s, fresh_baselines=fresh_baselines,
            unsafe_no_sandbox=unsafe_no_sandbox,
        )
        if len(sources) == 2:
            verdicts = [run_verify(sources[0], sources[1], config)]
        else:
            verdicts = verify_group(sources[0], sources[1:], config)
    except ProgramError as exc:
        fail(f"invalid reference {reference}: {exc}")
    except (ValueError, SandboxUnavailable) as exc:
        fail(str(exc))
    for path, verdict in zip(candidates, verdicts, strict=True):
        if json_out:
            result(verdict.to_json())
        else:
            prefix = f"{path}: " if len(candidates) > 1 else ""
            result(prefix + verdict.summary())
    raise typer.Exit(0 if all(v.status == "correct" for v in verdicts) else 1)


# ----------------------------------------------------------------------------- training
def _run_training(fn: Callable[..., str], *args: object) -> None:
    """Run a training command body and print its result line on stdout; its UsageError (or a
    missing sandbox) becomes one line and exit status 2."""
    from drtriton.judge import SandboxUnavailable
    from drtriton.train.recipes import UsageError

    try:
        message = fn(*args, console)
    except (UsageError, SandboxUnavailable) as exc:
        fail(str(exc))
    result(message)


@app.command()
def tokenizer(
    out: Path = typer.Option(..., help="Output directory (tokenizer files)."),
    corpus: list[Path] = typer.Option(
        [], "--corpus", help="JSONL files (programs, pairs, candidates) whose source, answer and "
                             "candidate fields join the package's sources; repeatable."),
    vocab_size: int = typer.Option(8192, min=300, help="Vocabulary size, at least 300."),
    split_digits: bool = typer.Option(
        True, help="One token per digit (numbers spelled alike everywhere)."),
) -> None:
    """Train a byte-level BPE tokenizer on our own programs and candidates, offline."""
    from drtriton.train.recipes import tokenizer_command

    _check_out_dir(out)
    _run_training(tokenizer_command, out, corpus, vocab_size, split_digits)


@app.command("init-model")
def init_model(
    out: Path = typer.Option(..., help="Output directory (model + tokenizer)."),
    preset: str = typer.Option(
        "tiny",
        help=(
            "tiny (hidden 64, 2 layers) | small (hidden 256, 4 layers) | scratch (hidden 384, "
            "6 layers, 12.6M parameters: the policy trained from scratch)."
        ),
    ),
    seed: int = typer.Option(0, help="Initialisation seed."),
    tokenizer_dir: Path = typer.Option(
        None, "--tokenizer", help="A tokenizer from drtriton tokenizer (default: one trained on "
                                  "the package's sources)."),
) -> None:
    """Create a random Qwen2-architecture model and an offline-built tokenizer."""
    from drtriton.train.recipes import init_model_command

    _check_out_dir(out)
    _run_training(init_model_command, preset, out, seed, tokenizer_dir)


@app.command()
def pairs(
    programs: Path = typer.Option(..., help="Programs JSONL (drtriton synth output)."),
    out: Path = typer.Option(..., help="Output pairs JSONL (judge-verified answers only)."),
    teacher: str = typer.Option("compiler", help=POLICY_HELP),
    samples: int = typer.Option(4, min=1, help="Answers per program for LLM teachers."),
    variants: int = typer.Option(
        1, min=1, help="With the compiler as teacher: up to this many distinct translations per "
                       "program (tiles, warps, stages, fusion), every verified one kept."),
    device: str = typer.Option(
        "auto", help="Judge (and hf: teacher) device: auto | cpu | cuda | cuda:N."),
    judge_workers: int = typer.Option(
        None, min=1, help="Parallel judge sandboxes (default: per device)."),
    temperature: float = typer.Option(0.6, help="Sampling temperature (LLM teachers)."),
    shape_notes: bool = typer.Option(
        False, help="With the compiler as teacher: answers state the shapes before the code."),
    verify_fraction: float = typer.Option(
        1.0, help="With the compiler as teacher: judge this fixed share of the programs "
                  "(the rest are written unjudged, verdict null)."),
    target: str = typer.Option(
        None, help="With the compiler as teacher: write candidates for this device (cpu | "
                   "cuda; default: the judge's)."),
    unjudged_only: bool = typer.Option(
        False, help="Write only the programs outside the judged sample, judging nothing; a "
                    "later run on the target device judges the sample (a CPU can write a "
                    "GPU's pairs)."),
    unsafe_no_sandbox: bool = typer.Option(False, "--unsafe-no-sandbox", help=UNSAFE_HELP),
) -> None:
    """Run a teacher on programs and keep only judge-verified answers (warm-up pairs).

    A program that cannot be run is skipped, with its reason on stderr."""
    from drtriton.train.pairs import PairsConfig
    from drtriton.train.recipes import pairs_command

    _check_policy(teacher, "--teacher")
    _check_writable(out)
    config = PairsConfig(str(programs), str(out), teacher, samples, device=device,
                         judge_workers=judge_workers, temperature=temperature,
                         unsafe_no_sandbox=unsafe_no_sandbox, variants=variants,
                         shape_notes=shape_notes, verify_fraction=verify_fraction,
                         target=target, unjudged_only=unjudged_only)
    _run_training(pairs_command, config)


@app.command()
def learn(
    plan: Path = typer.Option(..., help="Experiment plan (TOML; benchmarks/plans/learning.toml)."),
    until: str = typer.Option(
        None, help="Stop after this stage (e.g. eval_sft); default: every stage."),
    prepare_for: str = typer.Option(
        None, help="Run here only what needs no such device (cuda): programs, tokenizer, the "
                   "untrained model and the unjudged pairs, compiled for it; the run there "
                   "judges the pairs' sample and goes on."),
) -> None:
    """The learning experiment in one command: programs, tokenizer, pairs, SFT, DRPO and GRPO,
    held-out evaluation of each stage (and DRPO with search); resumes where it stopped."""
    from drtriton.train.recipes import learn_command

    _run_training(learn_command, plan, until, prepare_for)


@app.command()
def sft(
    model: Path = typer.Option(..., help="Model directory (Hugging Face checkpoint)."),
    pairs: Path = typer.Option(..., help="Pairs JSONL (drtriton pairs output)."),
    out: Path = typer.Option(..., help="Output model directory."),
    max_steps: int = typer.Option(-1, min=-1, help="Optimizer steps (-1: one epoch)."),
    batch_size: int = typer.Option(4, min=1, help="Per-device batch size (at least 1)."),
    lr: float = typer.Option(1e-5, help="Learning rate."),
    max_length: int = typer.Option(8192, min=1, help="Longest training sequence (tokens)."),
    lora: bool = typer.Option(False, help="Train LoRA adapters (merged into the saved model)."),
    lora_rank: int = typer.Option(16, min=1, help="LoRA rank (with --lora)."),
) -> None:
    """Supervised warm-up with TRL's SFTTrainer (loss on the answer only)."""
    from drtriton.train.recipes import sft_command
    from drtriton.train.sft import SFTRunConfig

    if max_steps == 0:
        fail("--max-steps must be -1 (one epoch) or at least 1")
    _check_out_dir(out)
    config = SFTRunConfig(str(model), str(pairs), str(out), max_steps=max_steps,
                          batch_size=batch_size, lr=lr, max_length=max_length, lora=lora,
                          lora_rank=lora_rank)
    _run_training(sft_command, config)


@app.command()
def rl(
    model: Path = typer.Option(..., help="Model directory (Hugging Face checkpoint)."),
    programs: Path = typer.Option(..., help="Programs JSONL with levels (drtriton synth output)."),
    out: Path = typer.Option(..., help="Run directory: metrics.jsonl and checkpoint/."),
    max_steps: int = typer.Option(100, help="RL steps."),
    programs_per_step: int = typer.Option(4, help="Programs per step."),
    n: int = typer.Option(8, help="Answers per program."),
    objective: str = typer.Option("drpo", help="drpo | grpo (ablation)."),
    lr: float = typer.Option(1e-6, help="Learning rate."),
    tau: float = typer.Option(10.0, help="DRPO temperature of the incorrect-set log-sum-exp."),
    lam: float = typer.Option(1.0, help="DRPO speed-weight temperature lambda."),
    all_correct: str = typer.Option(
        "drop",
        help=(
            "drop | speed: keep the speed signal of all-correct groups."
        ),
    ),
    max_new_tokens: int = typer.Option(2048, help="Longest sampled answer."),
    levels: str = typer.Option("1,2,5", help="Curriculum levels, in order."),
    advance_at: float = typer.Option(0.5, help="Rolling correctness rate that advances the level."),
    window: int = typer.Option(8, help="Steps in the rolling correctness rate."),
    teacher_mix: int = typer.Option(
        0,
        help=(
            "Compiler answers mixed into each group (tests, tiny models)."
        ),
    ),
    device: str = typer.Option("auto", help="auto | cpu | cuda | cuda:N (policy and judge)."),
    judge_workers: int = typer.Option(None, help="Parallel judge sandboxes."),
    save_every: int = typer.Option(1, help="Checkpoint every N steps."),
    seed: int = typer.Option(0, help="Run seed."),
    resume: bool = typer.Option(
        False, help="Continue the run in OUT from its last checkpoint (OUT must hold a run)."),
    lora: bool = typer.Option(
        False,
        help=(
            "Train LoRA adapters on a frozen base (bf16 on a GPU); "
            "merged into OUT/merged at the end."
        ),
    ),
    lora_rank: int = typer.Option(16, help="LoRA rank (with --lora)."),
    unsafe_no_sandbox: bool = typer.Option(False, "--unsafe-no-sandbox", help=UNSAFE_HELP),
) -> None:
    """Curriculum RL with DRPO: sample, judge, update; metrics.jsonl and resumable checkpoints."""
    from drtriton.train.recipes import rl_command
    from drtriton.train.rl import RLConfig

    try:
        level_list = tuple(int(x) for x in levels.split(",") if x.strip())
    except ValueError:
        fail(f"--levels must be comma-separated integers, got {levels!r}")
    _check_out_dir(out)
    if resume:
        _check_resumable(out)
    config = RLConfig(
        str(model),
        str(programs),
        str(out),
        max_steps=max_steps,
        programs_per_step=programs_per_step,
        n=n,
        max_new_tokens=max_new_tokens,
        objective=objective,
        tau=tau,
        lam=lam,
        all_correct=all_correct,
        lr=lr,
        levels=level_list,
        advance_at=advance_at,
        window=window,
        device=device,
        judge_workers=judge_workers,
        teacher_mix=teacher_mix,
        save_every=save_every,
        seed=seed,
        resume=resume,
        lora=lora,
        lora_rank=lora_rank,
        unsafe_no_sandbox=unsafe_no_sandbox,
    )
    _run_training(rl_command, config)


def _check_resumable(out: Path) -> None:
    """``--resume`` with nothing to resume is an error; a run stopped before its first
    checkpoint starts again from step 0, and says so."""
    from drtriton.train.rl import has_checkpoint

    if has_checkpoint(out):
        return
    if not (out / "metrics.jsonl").exists():
        fail(f"--resume: {out} holds no run to resume (no checkpoint); drop --resume to start one")
    warn(f"--resume: {out} has no checkpoint yet (the run stopped before its first save); "
         "starting again from step 0")


# ----------------------------------------------------------------------------- benchmarks
def _int_list(text: str, option: str) -> tuple[int, ...]:
    try:
        values = tuple(int(x) for x in text.split(",") if x.strip())
    except ValueError:
        values = ()
    if not values:
        fail(f"{option} must be comma-separated integers, got {text!r}")
    return values


@app.command()
def bench(
    out: Path = typer.Option(None, help="Report JSON (rows, CSV and plot are written beside it)."),
    plan: Path = typer.Option(
        None,
        help=(
            "Run a benchmark plan (TOML, benchmarks/plans/) into its results file, resuming; the "
            "other options do not apply."
        ),
    ),
    suite: Literal["synthetic", "kernelbench"] = typer.Option(
        "synthetic", help="synthetic | kernelbench."),
    levels: str = typer.Option(
        "1,2,5,20", help=f"Levels, comma-separated: 1..{MAX_LEVEL} (synthetic), or the "
                         "checkout's level folders (kernelbench: 1..4)."),
    num: int = typer.Option(
        10, min=1, help="Programs per level, at least 1 (kernelbench: at most this many)."),
    scale: Literal["small", "gpu"] = typer.Option("small", help="Synthetic scale: small | gpu."),
    programs: Path = typer.Option(
        None,
        help=(
            "Use these synthesized programs (JSONL) instead of synthesizing."
        ),
    ),
    path: Path = typer.Option(None, help="KernelBench checkout (suite kernelbench)."),
    policy: str = typer.Option("compiler", help=POLICY_HELP),
    samples: int = typer.Option(1, min=1, help="LLM answers per fragment when searching."),
    search: bool = typer.Option(False, help="Use test-time fragment search."),
    max_fragment_ops: int = typer.Option(4, help="Largest fragment (operators) when searching."),
    search_wall_s: float = typer.Option(600.0, help="Search wall time per problem (seconds)."),
    candidates_per_fragment: int = typer.Option(
        4,
        help=(
            "Candidates judged per fragment at most, when searching."
        ),
    ),
    search_cache: Path = typer.Option(
        None,
        help=(
            "SQLite cache of search verdicts (default: OUT.search.sqlite)."
        ),
    ),
    timeout_s: float = typer.Option(300.0, "--timeout-s", help=TIMEOUT_HELP),
    mode: Mode = typer.Option("strict", help="strict | hybrid (judge and compiler)."),
    preset: str = typer.Option(
        "hardened",
        help=(
            "Judge preset: hardened | kernelbench | kernelbench-v0.1 | tf32."
        ),
    ),
    device: str = typer.Option("auto", help="auto | cpu | cuda | cuda:N."),
    seed: int = typer.Option(None, help="Synthetic seed (default: the held-out benchmark seed)."),
    compile_baseline: bool = typer.Option(
        True, help="Time torch.compile too (--no-compile-baseline: eager only, faster)."),
    timing_budget_s: float = typer.Option(
        1.0, "--timing-budget-s", help="Timed calls per candidate for about this long (CUDA)."),
    generation_batch_size: int = typer.Option(
        32, min=1, help="Prompts a local model (hf:) samples at once."),
    unsafe_no_sandbox: bool = typer.Option(False, "--unsafe-no-sandbox", help=UNSAFE_HELP),
) -> None:
    """Benchmark a policy: accuracy, fast_p against eager and torch.compile, geomean speedups.

    Rows are appended to OUT.rows.jsonl as problems finish: the same command, run
    again, judges only the problems not done yet. A problem whose program cannot
    be run is a row with its reason (status invalid_reference)."""
    if plan is not None:
        if out is not None:
            fail("--plan writes to the plan's own results file: drop --out")
        _bench_plan(plan, unsafe_no_sandbox)
        return
    if out is None:
        fail("bench needs --out (or --plan)")
    from drtriton.bench import HELD_OUT_SEED, BenchConfig

    if suite == "kernelbench" and (path is None or not path.exists()):
        fail("--suite kernelbench needs --path to an existing KernelBench checkout")
    _check_policy(policy, "--policy")
    if programs is not None:
        _check_readable(programs, "--programs file")
    if timeout_s <= 0:
        fail("--timeout-s must be positive")
    if timing_budget_s <= 0:
        fail("--timing-budget-s must be positive")
    _check_search_budget(max_fragment_ops, search_wall_s, candidates_per_fragment)
    _check_device(device)
    _check_writable(out)
    config = BenchConfig(
        suite=suite, levels=_bench_levels(levels, suite), num=num, scale=scale,
        seed=HELD_OUT_SEED if seed is None else seed, programs=str(programs) if programs else None,
        path=str(path) if path else None, policy=policy, samples=samples, search=search,
        mode=mode, preset=preset,
        max_fragment_ops=max_fragment_ops, search_wall_s=search_wall_s, timeout_s=timeout_s,
        candidates_per_fragment=candidates_per_fragment,
        device=device, search_cache=str(search_cache) if search_cache else None,
        compile_baseline=compile_baseline, timing_budget_s=timing_budget_s,
        generation_batch_size=generation_batch_size, unsafe_no_sandbox=unsafe_no_sandbox,
    )  # fmt: skip
    _run_bench(config, out)


def _bench_levels(text: str, suite: str) -> tuple[int, ...]:
    levels = _int_list(text, "--levels")
    top = MAX_LEVEL if suite == "synthetic" else None
    for level in levels:
        if level < 1 or (top is not None and level > top):
            limits = f"between 1 and {top}" if top else "at least 1"
            fail(f"--levels: a {suite} level is {limits}, got {level}")
    return levels


def _check_policy(spec: str, option: str) -> None:
    """A policy spec (``--policy``, ``--teacher``) that names a policy, checked before work."""
    from drtriton.policy import parse_policy_spec

    try:
        kind, args = parse_policy_spec(spec)
    except ValueError as exc:
        fail(f"{option}: {exc}")
    if kind == "hf" and not Path(args[0]).is_dir():
        fail(f"{option} {spec}: no model directory {args[0]}")


def _run_bench(config: BenchConfig, out: Path) -> None:
    """Run the benchmark with a bar on a terminal, a line per problem in a log; the summary
    table and the report's paths on stdout."""
    from drtriton.bench import run_bench, summary_table
    from drtriton.judge import SandboxUnavailable

    with _progress("bench", "last") as progress:
        task = progress.add_task("bench", total=None, last="")

        def on_row(row: dict, total: int) -> None:
            progress.update(task, advance=1, total=total, last=f"{row['id']}: {row['status']}")
            if not console.is_terminal:  # a batch log gets a line per problem, not a bar
                console.print(_row_line(row))

        def on_start(problem_id: str) -> None:
            if not console.is_terminal:
                console.print(f"start {problem_id} {time.strftime('%H:%M:%S')}")

        def on_generated(done: int, total: int) -> None:
            progress.update(task, last=f"answers drawn: {done}/{total}")
            if not console.is_terminal:
                console.print(f"answers drawn {done}/{total} {time.strftime('%H:%M:%S')}")

        try:
            report = run_bench(config, out, on_row, on_start, on_warning=warn,
                               on_generated=on_generated)
        except (ValueError, FileNotFoundError, SandboxUnavailable) as exc:
            fail(str(exc))
    result(summary_table(report))
    result(f"report: {out} (rows: {out.name}.rows.jsonl, {out.with_suffix('.csv').name})")


def _bench_plan(path: Path, unsafe_no_sandbox: bool) -> None:
    from drtriton.bench.plan import PlanError, load_plan, run_plan, summary
    from drtriton.bench.results import markdown_table
    from drtriton.judge import SandboxUnavailable

    try:
        plan = load_plan(path)
    except PlanError as exc:
        fail(str(exc))
    with _progress(f"plan {plan.name}", "last") as progress:
        task = progress.add_task("plan", total=None, last="")

        def on_row(row: dict, total: int) -> None:
            last = f"{row['suite']}/{row['problem']} {row['mode']}: {row['status']}"
            progress.update(task, advance=1, total=total, last=last)
            if not console.is_terminal:
                console.print(last)

        try:
            rows = run_plan(plan, on_row, unsafe_no_sandbox=unsafe_no_sandbox, on_warning=warn)
        except (PlanError, ValueError, FileNotFoundError, SandboxUnavailable) as exc:
            fail(str(exc))
        except KeyboardInterrupt:
            fail(f"interrupted: every finished row is in {plan.results_path()}; run the same "
                 "command again to resume", code=130)
    table = [{k: ("n/a" if v is None else f"{v:.2f}" if isinstance(v, float) else v)
              for k, v in r.items()} for r in summary(rows)]
    if table:
        result(markdown_table(table, list(table[0])))
    result(f"results: {plan.results_path()}")


def _row_line(row: dict) -> str:
    """One log line for a finished benchmark problem."""
    def x(key: str) -> str:
        return f"{row[key]:.2f}x" if row.get(key) is not None else "-"

    return (f"done  {row['id']} {row['status']} vs eager {x('speedup_eager')} "
            f"vs compile {x('speedup_compile')} wall {row.get('wall_s', 0):.0f} s "
            f"{row.get('reason', '')[:120]}").rstrip()


if __name__ == "__main__":
    app()
