"""``drtriton convert``: compile a program, write the candidate, verify it with the judge.

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

from drtriton import devices


def resolve_device(device: str) -> str:
    """``--device``: ``auto`` (a GPU when one is visible), ``cpu`` or ``cuda``."""
    if device not in ("auto", "cpu", "cuda"):
        raise ValueError(f"--device must be auto, cpu or cuda, got {device!r}")
    return devices.resolve_device(device)


def compile_in_child(source: str, mode: str, device: str, tune: bool = True,
                     precision: str = "fp32") -> dict:
    """The compile step as the judge's sandboxed child runs it (``JudgePool.call``). On CUDA with
    ``tune``, the candidate's autotuned kernels are measured once on the program's inputs and
    their launches fixed to the chosen configs (``compiler.tune``); ``tuning`` records them, or
    ``tuning_error`` says why the candidate stayed autotuned. A hybrid compile on CUDA also
    builds the strict candidate and keeps whichever runs faster there (``hybrid_choice``): our
    tensor-core GEMMs can beat the vendor library the hybrid mode calls."""
    from drtriton.compiler import UnsupportedOperatorError
    from drtriton.program import ProgramError

    try:
        result = _compiled(source, mode, device, tune, precision)
        if mode == "hybrid" and device == "cuda" and tune and "tuning_error" not in result:
            result = _faster_of(source, result, _compiled(source, "strict", device, tune,
                                                          precision))
        return result
    except UnsupportedOperatorError as exc:
        return {"error": str(exc)}
    except (ProgramError, SyntaxError, ValueError) as exc:
        return {"error": f"{type(exc).__name__}: {exc}" if not str(exc) else str(exc)}


def compile_sandboxed(pool, source: str, mode: str, device: str) -> dict:
    """``compile_in_child`` in one of ``pool``'s sandboxes, at the precision of the pool's judge
    preset; on CUDA the child has the GPU to itself (it times kernels while tuning)."""
    arguments = {"mode": mode, "device": device, "precision": pool.config.precision}
    return pool.call(source, "drtriton.compiler.convert:compile_in_child", arguments,
                     phase="compiler capture", exclusive=device == "cuda")


def _compiled(source: str, mode: str, device: str, tune: bool, precision: str) -> dict:
    from drtriton.compiler import CompilerConfig, compile_program

    config = CompilerConfig(mode=mode, device=device, precision=precision)
    candidate = compile_program(source, config)
    if not (tune and device == "cuda" and "@triton.autotune(" in candidate):
        return {"candidate": candidate}
    from drtriton.compiler.tune import measure_choices

    try:
        tuning = measure_choices(candidate, source)
    except Exception as exc:  # the judge reports what running the candidate does
        return {"candidate": candidate, "tuning_error": f"{type(exc).__name__}: {exc}"[:500]}
    return {"candidate": compile_program(source, config, tuning),
            "tuning": {"device_name": tuning.device_name, "choices": dict(tuning.choices)}}


def _faster_of(source: str, hybrid: dict, strict: dict) -> dict:
    """The hybrid or the strict compile, whichever ``tune.time_candidates`` measures faster."""
    from drtriton.compiler import kernel_body
    from drtriton.compiler.tune import time_candidates

    if "tuning_error" in strict or kernel_body(strict["candidate"]) == kernel_body(
            hybrid["candidate"]):
        return hybrid
    try:
        hybrid_ms, strict_ms = time_candidates([hybrid["candidate"], strict["candidate"]],
                                               source)
    except Exception as exc:  # the hybrid compile stands; the judge will say how it runs
        return hybrid | {"hybrid_choice": {"error": f"{type(exc).__name__}: {exc}"[:300],
                                           "chose": "hybrid"}}
    chosen = strict if strict_ms < hybrid_ms else hybrid
    return chosen | {"hybrid_choice": {"hybrid_ms": hybrid_ms, "strict_ms": strict_ms,
                                       "chose": "strict" if chosen is strict else "hybrid"}}


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
) -> int:
    """Run the whole command; returns the exit status. ``search_budget``: ``SearchConfig`` fields
    (max_fragment_ops, wall_time_s, candidates_per_fragment, cache_path) for ``search``;
    ``progress(message)`` hears the search's steps (default: none); ``judge_options``: extra
    ``JudgeConfig`` fields (timeouts, ``unsafe_no_sandbox``)."""
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
            result = compile_sandboxed(pool, source, mode, dev)
            if "error" in result:
                echo(f"error: {program}: {result['error']}")
                return 2
            candidate = result["candidate"]
            if "tuning_error" in result:
                echo(f"note: kernels left autotuned: {result['tuning_error']}")
            if "strict_ms" in result.get("hybrid_choice", {}):
                c = result["hybrid_choice"]
                echo(f"note: kept the {c['chose']} compile ({c['strict_ms']:.3f} ms strict, "
                     f"{c['hybrid_ms']:.3f} ms hybrid)")
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
    from drtriton.program import ProgramError
    from drtriton.search import SearchConfig, search

    if device == "cpu":
        echo("searching for correctness only: no GPU, so candidates are verified but not timed")
    try:
        report = search(
            source, SearchConfig(device=device, mode=mode, **budget), on_progress=progress
        )
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
    verdict = report.verdict
    echo(f"wrote {out_path}\nverdict: {verdict.status}")
    if verdict.speedup_eager is not None:
        sc = f", {verdict.speedup_compile:.2f}x vs torch.compile" if verdict.speedup_compile else ""
        echo(f"speedup: {verdict.speedup_eager:.2f}x vs eager{sc}")
    return 0 if verdict.status == "correct" else 1


def _verify(pool, source: str, candidate: str, echo) -> int:
    verdict = pool.verify(source, candidate)
    line = f"verdict: {verdict.status}"
    if verdict.max_abs_err is not None:
        line += f" (max abs err {verdict.max_abs_err:.3g})"
    if verdict.reason:
        line += f" - {verdict.reason}"
    echo(line)
    if verdict.speedup_eager is not None:
        sc = f", {verdict.speedup_compile:.2f}x vs torch.compile" if verdict.speedup_compile else ""
        echo(f"speedup: {verdict.speedup_eager:.2f}x vs eager{sc} "
             f"({verdict.runtime_ms:.3f} ms vs {verdict.eager_ms:.3f} ms)")
    return 0 if verdict.status == "correct" else 1


if __name__ == "__main__":  # python -m drtriton.compiler.convert PROGRAM.py [OUT.py]
    sys.exit(convert(sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else None))
