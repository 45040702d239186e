"""The ``drtriton`` command (typer). Each stage's heavy imports stay inside its command.

Run ``drtriton --help`` for the list of commands.
"""

from __future__ import annotations

import contextlib
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
    preset: str = typer.Option("hardened", help="Judge preset: hardened (fp32 accuracy; GPU products as 3xTF32) | kernelbench | kernelbench-v0.1 | tf32 (TF32 products, baselines with TF32)."),
    search: bool = typer.Option(False, "--search", help="Test-time fragment search (verify and time per fragment)."),
    max_fragment_ops: int = typer.Option(4, help="With --search: largest fragment (operators)."),
    search_wall_s: float = typer.Option(600.0, help="With --search: its wall-time budget (seconds); a fragment range starts only if it and the composed program's verdict still fit."),
    candidates_per_fragment: int = typer.Option(4, help="With --search: candidates judged per fragment at most."),
    search_cache: Path = typer.Option(None, help="With --search: SQLite verdict cache reused across runs (default: none)."),
    timeout_s: float = typer.Option(120.0, "--timeout-s", help="Wall-clock limit of each candidate child (trials; timing)."),
    reference_timeout_s: float = typer.Option(300.0, "--reference-timeout-s", help="Wall-clock limit of the program's own runs (the compiler's capture, the reference run)."),
    unsafe_no_sandbox: bool = typer.Option(False, "--unsafe-no-sandbox", help="Run the program and its candidate without OS isolation when bubblewrap is unavailable."),
) -> None:
    """Compile a program to Triton with the built-in compiler and verify it with the judge."""
    from drtriton.compiler.convert import convert as run_convert

    if mode not in ("strict", "hybrid"):
        fail(f"--mode must be strict or hybrid, got {mode!r}")
    _check_search_budget(max_fragment_ops, search_wall_s, candidates_per_fragment)
    budget = {"max_fragment_ops": max_fragment_ops, "wall_time_s": search_wall_s,
              "candidates_per_fragment": candidates_per_fragment,
              "cache_path": str(search_cache) if search_cache else None}
    with console.status("search", spinner="dots") if search else contextlib.nullcontext() as status:
        code = run_convert(str(program), str(out) if out else None, device, mode,
                           echo=lambda m: console.print(m, highlight=False, markup=False), search=search,
                           search_budget=budget,
                           progress=(lambda m: status.update(f"search: {m}")) if search else None,
                           judge_options={"timeout_s": timeout_s, "preset": preset,
                                          "reference_timeout_s": reference_timeout_s,
                                          "unsafe_no_sandbox": unsafe_no_sandbox})
    raise typer.Exit(code)


def _check_search_budget(max_fragment_ops: int, search_wall_s: float, candidates_per_fragment: int) -> None:
    if max_fragment_ops < 1 or candidates_per_fragment < 1:
        fail("--max-fragment-ops and --candidates-per-fragment must be at least 1")
    if search_wall_s <= 0:
        fail("--search-wall-s must be positive")


UNSAFE_HELP = ("Run untrusted code without OS isolation when bubblewrap is unavailable "
               "(recorded in every verdict).")


@app.command()
def verify(
    reference: Path = typer.Argument(..., help="KernelBench-format reference program (.py)."),
    candidates: list[Path] = typer.Argument(..., help="Candidate programs defining ModelNew (.py); several are judged as one group."),
    device: str = typer.Option("auto", help="auto | cpu (Triton interpreter) | cuda."),
    preset: str = typer.Option("hardened", help="hardened | kernelbench | kernelbench-v0.1 | tf32 (PyTorch and its baselines with TF32)."),
    mode: str = typer.Option("strict", help="strict | hybrid (conv/matmul may use torch)."),
    timeout_s: float = typer.Option(120.0, "--timeout-s", help="Wall-clock limit of each candidate child (trials; timing)."),
    reference_timeout_s: float = typer.Option(300.0, "--reference-timeout-s", help="Wall-clock limit of the reference's own run (import, get_inputs, forward)."),
    fresh_baselines: bool = typer.Option(False, "--fresh-baselines", help="Re-measure eager and torch.compile instead of using the on-disk baseline cache."),
    unsafe_no_sandbox: bool = typer.Option(False, "--unsafe-no-sandbox", help=UNSAFE_HELP),
    json_out: bool = typer.Option(False, "--json", help="Print one JSON object per candidate instead of a summary."),
) -> None:
    """Judge candidates against a reference (exit 0 only if every verdict is correct)."""
    from drtriton.judge import JudgeConfig, SandboxUnavailable, verify_group
    from drtriton.judge import verify as run_verify
    from drtriton.program import ProgramError

    sources = []
    for path in (reference, *candidates):
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
            typer.echo(verdict.to_json())
        else:
            prefix = f"{path}: " if len(candidates) > 1 else ""
            typer.echo(prefix + verdict.summary())
    raise typer.Exit(0 if all(v.status == "correct" for v in verdicts) else 1)


# ----------------------------------------------------------------------------- training
def _run_training(fn, *args) -> None:
    """Run a training command body; its UsageError (or a missing sandbox) becomes one line and
    exit status 2."""
    from drtriton.judge import SandboxUnavailable
    from drtriton.train.commands import UsageError

    try:
        fn(*args, console)
    except (UsageError, SandboxUnavailable) as exc:
        fail(str(exc))


@app.command("init-model")
def init_model(
    out: Path = typer.Option(..., help="Output directory (model + tokenizer)."),
    preset: str = typer.Option("tiny", help="tiny (hidden 64, 2 layers) | small (hidden 256, 4 layers)."),
    seed: int = typer.Option(0, help="Initialisation seed."),
) -> None:
    """Create a random Qwen2-architecture model and an offline-built tokenizer."""
    from drtriton.train.commands import init_model_command

    _run_training(init_model_command, preset, out, seed)


@app.command()
def pairs(
    programs: Path = typer.Option(..., help="Programs JSONL (drtriton synth output)."),
    out: Path = typer.Option(..., help="Output pairs JSONL (judge-verified answers only)."),
    teacher: str = typer.Option("compiler", help="compiler | openai."),
    samples: int = typer.Option(4, help="Answers per program for LLM teachers."),
    device: str = typer.Option("auto", help="Judge device: auto | cpu | cuda | cuda:N."),
    judge_workers: int = typer.Option(None, help="Parallel judge sandboxes (default: per device)."),
    openai_url: str = typer.Option("", help="OpenAI-compatible base URL, e.g. http://127.0.0.1:8000/v1."),
    openai_model: str = typer.Option("", help="Model name at that endpoint."),
    temperature: float = typer.Option(0.6, help="Sampling temperature (LLM teachers)."),
    unsafe_no_sandbox: bool = typer.Option(False, "--unsafe-no-sandbox", help=UNSAFE_HELP),
) -> None:
    """Run a teacher on programs and keep only judge-verified answers (warm-up pairs)."""
    from drtriton.train.commands import pairs_command
    from drtriton.train.pairs import PairsConfig

    _check_writable(out)
    config = PairsConfig(str(programs), str(out), teacher, samples, device, judge_workers,
                         openai_url=openai_url, openai_model=openai_model, temperature=temperature,
                         unsafe_no_sandbox=unsafe_no_sandbox)
    _run_training(pairs_command, config)


@app.command()
def sft(
    model: Path = typer.Option(..., help="Model directory (Hugging Face checkpoint)."),
    pairs: Path = typer.Option(..., help="Pairs JSONL (drtriton pairs output)."),
    out: Path = typer.Option(..., help="Output model directory."),
    max_steps: int = typer.Option(-1, help="Optimizer steps (-1: one epoch)."),
    batch_size: int = typer.Option(4, help="Per-device batch size."),
    lr: float = typer.Option(1e-5, help="Learning rate."),
    max_length: int = typer.Option(8192, help="Longest training sequence (tokens)."),
    lora: bool = typer.Option(False, help="Train LoRA adapters (merged into the saved model)."),
    lora_rank: int = typer.Option(16, help="LoRA rank (with --lora)."),
) -> None:
    """Supervised warm-up with TRL's SFTTrainer (loss on the answer only)."""
    from drtriton.train.commands import sft_command
    from drtriton.train.sft import SFTRunConfig

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
    all_correct: str = typer.Option("drop", help="drop | speed: keep the speed signal of all-correct groups."),
    max_new_tokens: int = typer.Option(2048, help="Longest sampled answer."),
    levels: str = typer.Option("1,2,5", help="Curriculum levels, in order."),
    advance_at: float = typer.Option(0.5, help="Rolling correctness rate that advances the level."),
    window: int = typer.Option(8, help="Steps in the rolling correctness rate."),
    teacher_mix: int = typer.Option(0, help="Compiler answers mixed into each group (tests, tiny models)."),
    device: str = typer.Option("auto", help="auto | cpu | cuda | cuda:N (policy and judge)."),
    judge_workers: int = typer.Option(None, help="Parallel judge sandboxes."),
    save_every: int = typer.Option(1, help="Checkpoint every N steps."),
    seed: int = typer.Option(0, help="Run seed."),
    resume: bool = typer.Option(False, help="Continue from OUT/checkpoint."),
    lora: bool = typer.Option(False, help="Train LoRA adapters on a frozen base (bf16 on a GPU); merged into OUT/merged at the end."),
    lora_rank: int = typer.Option(16, help="LoRA rank (with --lora)."),
    unsafe_no_sandbox: bool = typer.Option(False, "--unsafe-no-sandbox", help=UNSAFE_HELP),
) -> None:
    """Curriculum RL with DRPO: sample, judge, update; metrics.jsonl and resumable checkpoints."""
    from drtriton.train.commands import rl_command
    from drtriton.train.rl import RLConfig

    try:
        level_list = tuple(int(x) for x in levels.split(",") if x.strip())
    except ValueError:
        fail(f"--levels must be comma-separated integers, got {levels!r}")
    config = RLConfig(
        str(model), str(programs), str(out), max_steps=max_steps, programs_per_step=programs_per_step,
        n=n, max_new_tokens=max_new_tokens, objective=objective, tau=tau, lam=lam,
        all_correct=all_correct, lr=lr, levels=level_list, advance_at=advance_at, window=window,
        device=device, judge_workers=judge_workers, teacher_mix=teacher_mix, save_every=save_every,
        seed=seed, resume=resume, lora=lora, lora_rank=lora_rank,
        unsafe_no_sandbox=unsafe_no_sandbox,
    )
    _run_training(rl_command, config)


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
    plan: Path = typer.Option(None, help="Run a benchmark plan (TOML, benchmarks/plans/) into its results file, resuming; the other options do not apply."),
    suite: str = typer.Option("synthetic", help="synthetic | kernelbench."),
    levels: str = typer.Option("1,2,5,20", help="Levels, comma-separated."),
    num: int = typer.Option(10, help="Programs per level (kernelbench: at most this many)."),
    scale: str = typer.Option("small", help="Synthetic scale: small | gpu."),
    programs: Path = typer.Option(None, help="Use these synthesized programs (JSONL) instead of synthesizing."),
    path: Path = typer.Option(None, help="KernelBench checkout (suite kernelbench)."),
    policy: str = typer.Option("compiler", help="compiler | hf:MODEL_DIR | openai:BASE_URL#MODEL."),
    samples: int = typer.Option(1, help="LLM answers per fragment when searching."),
    search: bool = typer.Option(False, help="Use test-time fragment search."),
    max_fragment_ops: int = typer.Option(4, help="Largest fragment (operators) when searching."),
    search_wall_s: float = typer.Option(600.0, help="Search wall time per problem (seconds)."),
    candidates_per_fragment: int = typer.Option(4, help="Candidates judged per fragment at most, when searching."),
    search_cache: Path = typer.Option(None, help="SQLite cache of search verdicts (default: OUT.search.sqlite)."),
    timeout_s: float = typer.Option(300.0, "--timeout-s", help="Judge wall-clock limit per candidate run."),
    mode: str = typer.Option("strict", help="strict | hybrid (judge and compiler)."),
    preset: str = typer.Option("hardened", help="Judge preset: hardened | kernelbench | kernelbench-v0.1 | tf32."),
    device: str = typer.Option("auto", help="auto | cpu | cuda."),
    seed: int = typer.Option(None, help="Synthetic seed (default: the held-out benchmark seed)."),
    unsafe_no_sandbox: bool = typer.Option(False, "--unsafe-no-sandbox", help=UNSAFE_HELP),
) -> None:
    """Benchmark a policy: accuracy, fast_p against eager and torch.compile, geomean speedups."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    if plan is not None:
        if out is not None:
            fail("--plan writes to the plan's own results file: drop --out")
        _bench_plan(plan, unsafe_no_sandbox)
        return
    if out is None:
        fail("bench needs --out (or --plan)")

    from drtriton.bench import HELD_OUT_SEED, BenchConfig, run_bench, summary_table
    from drtriton.judge import SandboxUnavailable

    if suite not in ("synthetic", "kernelbench"):
        fail(f"--suite must be synthetic or kernelbench, got {suite!r}")
    if suite == "kernelbench" and (path is None or not path.exists()):
        fail("--suite kernelbench needs --path to an existing KernelBench checkout")
    from drtriton.policy import parse_policy_spec

    try:
        kind, args = parse_policy_spec(policy)
    except ValueError as exc:
        fail(str(exc))
    if kind == "hf" and not Path(args[0]).is_dir():
        fail(f"--policy {policy}: no model directory {args[0]}")
    if programs is not None and not programs.exists():
        fail(f"--programs: no such file {programs}")
    if timeout_s <= 0:
        fail("--timeout-s must be positive")
    _check_search_budget(max_fragment_ops, search_wall_s, candidates_per_fragment)
    _check_writable(out)
    config = BenchConfig(
        suite=suite, levels=_int_list(levels, "--levels"), num=num, scale=scale,
        seed=HELD_OUT_SEED if seed is None else seed, programs=str(programs) if programs else None,
        path=str(path) if path else None, policy=policy, samples=samples, search=search, mode=mode, preset=preset,
        max_fragment_ops=max_fragment_ops, search_wall_s=search_wall_s, timeout_s=timeout_s,
        candidates_per_fragment=candidates_per_fragment,
        device=device, search_cache=str(search_cache) if search_cache else None,
        unsafe_no_sandbox=unsafe_no_sandbox,
    )  # fmt: skip
    columns = (TextColumn("bench"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(), TextColumn("{task.fields[last]}"))
    with Progress(*columns, console=console) as progress:
        task = progress.add_task("bench", total=None, last="")

        def on_row(row: dict, total: int) -> None:
            progress.update(task, advance=1, total=total, last=f"{row['id']}: {row['status']}")
            if not console.is_terminal:  # a batch log gets a line per problem, not a bar
                console.print(_row_line(row), highlight=False, markup=False, soft_wrap=True)

        def on_start(problem_id: str) -> None:
            if not console.is_terminal:
                console.print(f"start {problem_id} {time.strftime('%H:%M:%S')}", highlight=False, soft_wrap=True)

        try:
            report = run_bench(config, out, on_row, on_start)
        except (ValueError, FileNotFoundError, SandboxUnavailable) as exc:
            fail(str(exc))
    typer.echo(summary_table(report))
    console.print(f"report: {out} (rows: {out.name}.rows.jsonl, {out.with_suffix('.csv').name})")


def _bench_plan(path: Path, unsafe_no_sandbox: bool) -> None:
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from drtriton.bench.plan import PlanError, load_plan, run_plan, summary
    from drtriton.bench.records import markdown_table
    from drtriton.judge import SandboxUnavailable

    try:
        plan = load_plan(path)
    except PlanError as exc:
        fail(str(exc))
    columns = (TextColumn(f"plan {plan.name}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
               TextColumn("{task.fields[last]}"))  # fmt: skip
    with Progress(*columns, console=console) as progress:
        task = progress.add_task("plan", total=None, last="")

        def on_row(row: dict, total: int) -> None:
            last = f"{row['suite']}/{row['problem']} {row['mode']}: {row['status']}"
            progress.update(task, advance=1, total=total, last=last)
            if not console.is_terminal:
                console.print(last, highlight=False, markup=False, soft_wrap=True)

        try:
            rows = run_plan(plan, on_row, unsafe_no_sandbox=unsafe_no_sandbox)
        except (PlanError, ValueError, FileNotFoundError, SandboxUnavailable) as exc:
            fail(str(exc))
    table = [{k: ("n/a" if v is None else f"{v:.2f}" if isinstance(v, float) else v)
              for k, v in r.items()} for r in summary(rows)]
    if table:
        typer.echo(markdown_table(table, list(table[0])))
    console.print(f"results: {plan.results_path()}")


def _row_line(row: dict) -> str:
    """One log line for a finished benchmark problem."""
    def x(key: str) -> str:
        return f"{row[key]:.2f}x" if row.get(key) is not None else "-"

    return (f"done  {row['id']} {row['status']} vs eager {x('speedup_eager')} "
            f"vs compile {x('speedup_compile')} wall {row.get('wall_s', 0):.0f} s "
            f"{row.get('reason', '')[:120]}").rstrip()


if __name__ == "__main__":
    app()
