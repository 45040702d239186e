"""The compiler's entry points for a sandboxed child: compile (and on a GPU tune) one program.

The program is a user's code: the compiler's capture (which builds ``Model`` and calls
``get_inputs``) runs in one of the judge's sandboxed children (``compile_sandboxed``), bounded by
the reference's time limit. The judge names ``compile_in_child`` by the string
``"drtriton.compiler.convert:compile_in_child"``. The ``convert`` command over these is
``drtriton.commands.convert``.
"""

from __future__ import annotations

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


def compile_sandboxed(pool, source: str, mode: str, device: str,
                      precision: str | None = None) -> dict:
    """``compile_in_child`` in one of ``pool``'s sandboxes, at ``precision`` (default: that of
    the pool's judge preset); on CUDA the child has the GPU to itself (it times kernels while
    tuning)."""
    arguments = {"mode": mode, "device": device,
                 "precision": precision or pool.config.precision}
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
