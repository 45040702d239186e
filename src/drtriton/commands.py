"""The bodies of commands that span layers: ``drtriton convert`` (the compiler's candidate and
the judge's verdict on it, or the search's choice). ``cli.py`` declares the options and calls
these; the compiler's own entry points (``compile_sandboxed``, ``resolve_device``) are in
``drtriton.compiler.convert``.

    drtriton convert examples/mlp_gelu.py -o mlp_gelu_triton.py --device auto --mode strict

Exit status: 0 only when the judge says the candidate is correct; 1 when it is not; 2 (with a
one-line message) when the program cannot be read or uses an operator the compiler cannot lower.
The program is a user's code: the compiler's capture (which builds ``Model`` and calls
``get_inputs``) runs in one of the judge's sandboxed children, bounded by the reference's time
limit, like the verification after it.
On CPU the judge runs the kernels in the Triton interpreter (``TRITON_INTERPRET=1``, set here
before Triton is imported); on a GPU it also reports speedups over eager and ``torch.compile``.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from drtriton.compiler.convert import compile_sandboxed, resolve_device


def convert(
    program: str,
    out: str | None = None,
    device: str = "auto",
    mode: str = "strict",
    verify: bool = True,
    echo=print,
    search: bool = False,
    search_budget: dict | None = None,
    progress=None,
    judge_options: dict | None = None,
    capture: str = "auto",
) -> int:
    """Run the whole command; returns the exit status. ``search_budget``: ``SearchConfig`` fields
    (max_fragment_ops, wall_time_s, candidates_per_fragment, cache_path) for ``search``;
    ``progress(message)`` hears the search's steps (default: none); ``judge_options``: extra
    ``JudgeConfig`` fields (timeouts, ``unsafe_no_sandbox``); ``capture``: the compile's
    ``CompilerConfig.capture`` (the search's candidates use the default)."""
    try:
        source = Path(program).read_text()
    except OSError as exc:
        echo(f"error: cannot read {program}: {exc.strerror or exc}")
        return 2
    try:
        dev = resolve_device(device)
    except ValueError as exc:
        echo(f"error: {exc}")
        return 2
    if dev == "cpu":
        os.environ.setdefault("TRITON_INTERPRET", "1")
    if search:
        preset = (judge_options or {}).get("preset", "hardened")
        return _search(program, source, out, mode, dev, echo,
                       {**(search_budget or {}), "preset": preset}, progress)
    from drtriton.judge import JudgeConfig, JudgePool, SandboxUnavailable
    from drtriton.program import ProgramError

    try:
        config = JudgeConfig(mode=mode, device=dev, jobs_per_gpu=1, **(judge_options or {}))
        with JudgePool(config, workers=1) as pool:
            result = compile_sandboxed(pool, source, mode, dev, tunings=_tunings(dev),
                                       capture=capture)
            if "error" in result:
                echo(f"error: {program}: {result['error']}")
                return 2
            candidate = result["candidate"]
            if "tuning_error" in result:
                echo(f"note: kernels left autotuned: {result['tuning_error']}")
            if "strict_ms" in result.get("hybrid_choice", {}):
                c = result["hybrid_choice"]
                echo(f"note: kept the {c['chose']} compile ({c['strict_ms']:.3f} ms strict, "
                     f"{c['hybrid_ms']:.3f} ms hybrid{_mix_note(c)})")
            out_path = _write(program, out, candidate, echo)
            if out_path is None:
                return 2
            tuned = len(result.get("tuning", {}).get("choices", {}))
            echo(f"wrote {out_path} ({candidate.count('@triton.jit')} Triton kernels, mode {mode}, "
                 f"{dev}{f', {tuned} tuned' if tuned else ''})")
            return _verify(pool, source, candidate, echo) if verify else 0
    except ProgramError as exc:
        echo(f"error: {program}: {exc}")
        return 2
    except (SandboxUnavailable, ValueError) as exc:
        echo(f"error: {exc}")
        return 2


def _mix_note(choice: dict) -> str:
    """The mixes of vendor and Triton products a hybrid convert tried (``compiler.mix``)."""
    trials = choice.get("mix_trials", [])
    if not trials:
        return ""
    best = min(trials, key=lambda t: t["trial_ms"])
    kept = choice.get("triton_products")
    return (f"; {len(trials)} mixes tried, best {best['trial_ms']:.3f} ms"
            + (f", products {', '.join(map(str, kept))} kept in Triton" if kept else ""))


def _write(program: str, out: str | None, candidate: str, echo) -> Path | None:
    out_path = Path(out) if out else Path(program).with_name(Path(program).stem + "_triton.py")
    try:
        out_path.parent.mkdir(parents=True, exist_ok=True)
        out_path.write_text(candidate)
    except OSError as exc:
        echo(f"error: cannot write {out_path}: {exc.strerror or exc}")
        return None
    return out_path


def _search(program: str, source: str, out: str | None, mode: str, device: str, echo, budget: dict,
            progress=None) -> int:
    """``convert --search``: test-time fragment search; the chosen program is already verified."""
    from drtriton.judge import JudgeConfig
    from drtriton.policy import CompilerPolicy
    from drtriton.program import ProgramError
    from drtriton.search import SearchConfig, search

    if device == "cpu":
        echo("searching for correctness only: no GPU, so candidates are verified but not timed")
    config = SearchConfig(device=device, mode=mode, **budget)
    precision = JudgeConfig(preset=config.preset).precision
    compiler = CompilerPolicy(device=device, mode=mode, precision=precision)
    try:
        report = search(source, config, [compiler.search_generator()], on_progress=progress)
    except ProgramError as exc:
        echo(f"error: {program}: {exc}")
        return 2
    echo(
        f"search: {report.fragments_tried} fragments, "
        f"{report.candidates_judged} candidates judged, "
        f"{report.cache_hits} cached, {report.wall_s:.1f} s; chose the {report.chosen} candidate"
    )
    for note in report.notes:
        echo(f"note: {note}")
    if report.source is None:
        echo(f"verdict: {report.status} - no verified candidate")
        return 1
    out_path = _write(program, out, report.source, echo)
    if out_path is None:
        return 2
    echo(f"wrote {out_path}")
    return _report(report.verdict, echo)


def _verify(pool, source: str, candidate: str, echo) -> int:
    return _report(pool.verify(source, candidate), echo)


def _report(verdict, echo) -> int:
    for line in verdict.report_lines():
        echo(line)
    return 0 if verdict.ok else 1


def _tunings(device: str):
    """The user's convert-time measurements on a GPU (``compiler.tune.TuningCache``)."""
    if device != "cuda":
        return None
    from drtriton.compiler.tune import TuningCache, default_tuning_cache

    return TuningCache(default_tuning_cache())


if __name__ == "__main__":  # python -m drtriton.commands PROGRAM.py [OUT.py]
    sys.exit(convert(sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else None))
