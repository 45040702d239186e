"""The compiler's entry points for a sandboxed child: compile (and on a GPU tune) one program.

The program is a user's code: the compiler's capture (which builds ``Model`` and calls
``get_inputs``) runs in one of the judge's sandboxed children (``compile_sandboxed``), bounded by
the reference's time limit. The judge names ``compile_in_child`` by the string
``"drtriton.compiler.convert:compile_in_child"``. The ``convert`` command over these is
``drtriton.commands.convert``.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from typing import TYPE_CHECKING

from drtriton import devices

if TYPE_CHECKING:
    from drtriton.compiler import CompilerConfig
    from drtriton.compiler.tune import TuningCache


def resolve_device(device: str) -> str:
    """``--device``: ``auto`` (a GPU when one is visible), ``cpu`` or ``cuda``."""
    if device not in ("auto", "cpu", "cuda"):
        raise ValueError(f"--device must be auto, cpu or cuda, got {device!r}")
    return devices.resolve_device(device)


class Measurements:
    """Convert-time measurements known before a compile (``TuningCache``) and those it made."""

    def __init__(self, known: dict | None = None) -> None:
        self.known, self.made = dict(known or {}), {}

    def get(self, key: str, measure):
        if key in self.known:
            return self.known[key]
        value = measure()
        if "error" not in value:  # a failure is not a measurement: the next convert retries
            self.made[key] = value
        return value


def compile_in_child(source: str, mode: str, device: str, tune: bool = True,
                     precision: str = "fp32", known: dict | None = None,
                     compile_workers: int = 1, capture: str = "auto") -> dict:
    """The compile step as the judge's sandboxed child runs it (``JudgePool.call``). On CUDA with
    ``tune``, the candidate's autotuned kernels are measured once on the program's inputs and
    their launches fixed to the chosen configs (``compiler.tune``); ``tuning`` records them, or
    ``tuning_error`` says why the candidate stayed autotuned. A hybrid compile on CUDA also
    builds the strict candidate and keeps whichever runs faster there (``hybrid_choice``): our
    tensor-core GEMMs can beat the vendor library the hybrid mode calls.

    ``known`` holds earlier measurements of this program (``TuningCache``), used instead of
    measuring again (a compile that finds all it needs there never asks for the GPU alone);
    ``measurements`` in the result are the new ones. ``compile_workers``: processes that compile
    the configs to tune (``tune._precompile_in_processes``); ``capture``:
    ``CompilerConfig.capture``."""
    from drtriton.compiler import CompilerConfig, UnsupportedOperatorError
    from drtriton.program import ProgramError

    measurements = Measurements(known)
    try:
        config = CompilerConfig(mode=mode, device=device, precision=precision, capture=capture)
        result = _compiled(source, config, tune, measurements, compile_workers)
        if mode == "hybrid" and device == "cuda" and tune and "tuning_error" not in result:
            strict = _compiled(source, dataclasses.replace(config, mode="strict"), tune,
                               measurements, compile_workers)
            chosen = _faster_of(source, result, strict, measurements, compile_workers)
            result = _mixed(source, config, result, strict, chosen, measurements,
                            compile_workers)
        public = {k: v for k, v in result.items() if not k.startswith("_")}
        return public | {"measurements": measurements.made}
    except UnsupportedOperatorError as exc:
        return {"error": str(exc)}
    except (ProgramError, SyntaxError, ValueError) as exc:
        return {"error": f"{type(exc).__name__}: {exc}" if not str(exc) else str(exc)}


def compile_sandboxed(pool, source: str, mode: str, device: str,
                      precision: str | None = None, tunings: TuningCache | None = None,
                      capture: str = "auto") -> dict:
    """``compile_in_child`` in one of ``pool``'s sandboxes, at ``precision`` (default: that of
    the pool's judge preset). On CUDA the child shares its GPU while it captures and compiles,
    and has it alone while it measures (``gpu_gate``); with ``tunings``, measurements known
    there are not made again, and new ones are stored there."""
    from drtriton.compiler.tune import TuningCache, tuning_environment

    precision = precision or pool.config.precision
    gated = device == "cuda"
    arguments = {"mode": mode, "device": device, "precision": precision, "capture": capture,
                 "compile_workers": workers_per_compile(pool.size) if gated else 1}
    if not gated or tunings is None:
        return pool.call(source, FUNCTION, arguments, phase="compiler capture", gated=gated)
    program = TuningCache.program_key(source, precision, tuning_environment())
    known = tunings.load(program)
    result = pool.call(source, FUNCTION, arguments | {"known": known}, phase="compiler capture",
                       gated=True)
    if result.get("measurements"):
        tunings.store(program, result["measurements"])
    return result | {"tuning_cached": bool(known) and not result.get("measurements")}


FUNCTION = "drtriton.compiler.convert:compile_in_child"


def workers_per_compile(slots: int) -> int:
    """Processes each sandboxed compile may use to compile the configs it tunes: the host's
    cores shared among the judge's slots (a plan keeps every slot busy)."""
    import os

    return max(1, (os.cpu_count() or 1) // max(1, slots))


def _compiled(source: str, config: CompilerConfig, tune: bool, measurements: Measurements,
              compile_workers: int = 1, reuse: Sequence[dict] = ()) -> dict:
    """One compile, on CUDA with its autotuned kernels measured and fixed. ``reuse``: earlier
    tuned compiles of this program, whose configs serve every kernel they share with this one
    (``mix.reused_choices``). Keys starting with ``_`` stay in the child."""
    from drtriton.compiler import compile_program, compile_with_products
    from drtriton.compiler.mix import reused_choices

    candidate, products = compile_with_products(source, config)
    result = {"candidate": candidate, "_autotuned": candidate, "_products": products}
    if not (tune and config.device == "cuda" and "@triton.autotune(" in candidate):
        return result
    from drtriton.compiler.tune import Tuning, measure_choices, measurement_key

    def measure() -> dict:
        try:
            tuning = measure_choices(candidate, source, compile_workers=compile_workers)
        except Exception as exc:  # the judge reports what running the candidate does
            return {"error": f"{type(exc).__name__}: {exc}"[:500]}
        return {"device_name": tuning.device_name, "choices": dict(tuning.choices)}

    tuned = [(r["_autotuned"], r["tuning"]["choices"]) for r in reuse if "tuning" in r]
    choices = reused_choices(candidate, tuned) if tuned else None
    if choices is not None:
        device_name = next(r["tuning"]["device_name"] for r in reuse if "tuning" in r)
        chosen = {"device_name": device_name, "choices": choices, "reused": True}
    else:
        chosen = measurements.get(measurement_key("tuning", candidate), measure)
    if "error" in chosen:
        return result | {"tuning_error": chosen["error"]}
    tuning = Tuning(chosen["device_name"], tuple(sorted(chosen["choices"].items())))
    return result | {"candidate": compile_program(source, config, tuning), "tuning": chosen}


def _faster_of(source: str, hybrid: dict, strict: dict, measurements: Measurements,
               compile_workers: int = 1) -> dict:
    """The hybrid or the strict compile, whichever ``tune.time_candidates`` measures faster."""
    from drtriton.compiler import kernel_body
    from drtriton.compiler.tune import measurement_key, time_candidates

    if "tuning_error" in strict or kernel_body(strict["candidate"]) == kernel_body(
            hybrid["candidate"]):
        return hybrid

    def measure() -> dict:
        try:
            hybrid_ms, strict_ms = time_candidates([hybrid["candidate"], strict["candidate"]],
                                                   source, compile_workers=compile_workers)
        except Exception as exc:  # the hybrid compile stands; the judge will say how it runs
            return {"error": f"{type(exc).__name__}: {exc}"[:300], "chose": "hybrid"}
        return {"hybrid_ms": hybrid_ms, "strict_ms": strict_ms,
                "chose": "strict" if strict_ms < hybrid_ms else "hybrid"}

    key = measurement_key("faster", hybrid["candidate"], strict["candidate"])
    choice = measurements.get(key, measure)
    chosen = strict if choice["chose"] == "strict" else hybrid
    return chosen | {"hybrid_choice": choice}


def _mixed(source: str, config: CompilerConfig, hybrid: dict, strict: dict, chosen: dict,
           measurements: Measurements, compile_workers: int = 1) -> dict:
    """``chosen`` (the faster of the hybrid and strict compiles), or a hybrid compile keeping
    some products in Triton that ``mix.choose_mix`` measured faster than it; the trials are
    recorded in ``hybrid_choice``."""
    from drtriton.compiler.mix import adopt_names, choose_mix, product_groups
    from drtriton.compiler.tune import measurement_key, time_candidates

    choice = chosen.get("hybrid_choice", {})
    groups = product_groups(hybrid["_products"])
    if "strict_ms" not in choice or "tuning_error" in strict or len(groups) < 2:
        return chosen
    everything = frozenset(range(len(hybrid["_products"])))
    compiles = {frozenset(): hybrid, everything: strict}

    def compiled(kept: frozenset[int]) -> dict:
        if kept not in compiles:
            mix = dataclasses.replace(config, triton_products=kept)
            try:
                result = _compiled(source, mix, True, measurements, compile_workers,
                                   (hybrid, strict))
            except Exception as exc:  # noqa: BLE001 - a mix that fails loses its trial
                result = {"tuning_error": f"{type(exc).__name__}: {exc}"[:300]}
            if "tuning_error" not in result:
                names_from = [hybrid["candidate"], strict["candidate"]]
                result["candidate"] = adopt_names(result["candidate"], names_from)
            compiles[kept] = result
        return compiles[kept]

    def time_pair(best: frozenset[int], trial: frozenset[int]) -> tuple[float, float]:
        if "tuning_error" in compiled(trial):
            return 1.0, math.inf
        pair = [compiled(best)["candidate"], compiled(trial)["candidate"]]

        def measure() -> dict:
            try:
                return {"ms": time_candidates(pair, source, compile_workers=compile_workers)}
            except Exception as exc:  # the trial loses; the judge will say how the best runs
                return {"error": f"{type(exc).__name__}: {exc}"[:300]}

        value = measurements.get(measurement_key("mix", *pair), measure)
        return (1.0, math.inf) if "error" in value else tuple(value["ms"])

    start = everything if choice["chose"] == "strict" else frozenset()
    kept, trials = choose_mix(groups, start, time_pair)
    if kept == start:
        return chosen | {"hybrid_choice": choice | {"mix_trials": trials}}
    # the moves may end at the other pure compile: all products in Triton is the strict one
    chose = {frozenset(): "hybrid", everything: "strict"}.get(kept, "mixed")
    picked = {"chose": chose} | ({"triton_products": sorted(kept)} if chose == "mixed" else {})
    return compiles[kept] | {"hybrid_choice": choice | {"mix_trials": trials} | picked}
