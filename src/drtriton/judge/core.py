"""Judge one (reference, candidate) pair in a sandbox slot.

The trusted side of the judge. The reference is loaded *here*, in the judge's process: its inputs,
parameters and outputs are produced here and its outputs never leave this process. The candidate
runs in a fresh sandboxed child (``worker.py``) on copies of the inputs and sends back only its
outputs, the inputs as it left them and its run-time report; everything is compared here.

Order of decisions: static checks -> candidate child (faults, run-time strictness report) ->
outputs (types, shapes, inputs unchanged, NaN/Inf pattern, tolerance) -> on CUDA, timing of the
candidate and of the reference (eager and ``torch.compile``) in fresh children on the same inputs,
with the candidate's outputs re-verified after timing.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import shutil
import signal
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import torch

from drtriton.judge.compare import Comparison, compare_outputs
from drtriton.judge.config import JudgeConfig
from drtriton.judge.sandbox import JobResult, Sandbox
from drtriton.judge.static import check_source
from drtriton.judge.verdict import Verdict
from drtriton.program import (
    TORCH_STATE_LOCK,
    ProgramError,
    as_output_tuple,
    fingerprint,
    load_program,
    make_inputs,
)


class InvalidReferenceError(ProgramError):
    """The reference program loads but cannot be run (bad inputs, forward fails, ...)."""


@dataclass(frozen=True)
class Reference:
    """A reference run on fixed seeds: CPU copies of init args and outputs, and for each input
    seed the inputs' fingerprint (children remake the inputs from the seeds)."""

    source: str
    model_seed: int
    init_inputs: list
    input_seeds: list[int]
    fingerprints: list[list]
    outputs: list[tuple[torch.Tensor, ...]]


@dataclass(frozen=True)
class Slot:
    """What a judge call needs from its pool: a sandbox and its devices."""

    sandbox: Sandbox
    judge_device: str  # where the reference runs in this process (e.g. cuda:1)
    child_device: str  # the same GPU as the child sees it (e.g. cuda)
    environment: dict


# ---- reference -------------------------------------------------------------------------
@contextlib.contextmanager
def precision(allow_tf32: bool) -> Iterator[None]:
    """Set the TF32 flags for baselines and reference runs; restore them afterwards."""
    saved = (torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32)
    torch.backends.cuda.matmul.allow_tf32 = allow_tf32
    torch.backends.cudnn.allow_tf32 = allow_tf32
    try:
        yield
    finally:
        torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = saved


def run_reference(
    source: str, config: JudgeConfig, device: str, seeds: list[int], model_seed: int
) -> Reference:
    """Build ``Model`` under ``model_seed`` and run it on inputs made under each of ``seeds``.

    Inputs are drawn on ``device`` (``make_inputs``) and only their fingerprints are kept. Holds
    ``TORCH_STATE_LOCK`` throughout: the seeds, the model and the eager run are this thread's.
    """
    with TORCH_STATE_LOCK:
        module = load_program(source, "reference")
        try:
            torch.manual_seed(model_seed)
            init = list(module.get_init_inputs())
            torch.manual_seed(model_seed)
            model = module.Model(*init).to(device)
            prints, outputs = [], []
            with torch.no_grad(), precision(config.allows_tf32):
                for seed in seeds:
                    xs = make_inputs(module, seed, device)
                    prints.append(fingerprint(xs))
                    out = as_output_tuple(model(*xs))
                    outputs.append(tuple(t.detach().to("cpu", copy=True) for t in out))
                    del xs, out
        except ProgramError:
            raise
        except Exception as exc:
            raise InvalidReferenceError(f"reference: {type(exc).__name__}: {exc}") from exc
    return Reference(source, model_seed, [_cpu(x) for x in init], list(seeds), prints, outputs)


def _cpu(x: object) -> object:
    return x.detach().to("cpu", copy=True) if isinstance(x, torch.Tensor) else x


# ---- jobs ----------------------------------------------------------------------------------
def _write_job(job_dir: Path, job: dict, ref: Reference, files: dict) -> None:
    """The job directory: spec, init args, the reference (it makes the inputs) and sources.

    No inputs: the child remakes them from ``job["input_seeds"]`` with the reference's
    ``get_inputs`` on its GPU (GBs at GPU scale took tens of seconds to write and read back).
    """
    job_dir.mkdir(parents=True)
    (job_dir / "job.json").write_text(json.dumps(job))
    torch.save(ref.init_inputs, job_dir / "init.pt")
    (job_dir / "reference.py").write_text(ref.source)
    for name, text in files.items():
        (job_dir / name).write_text(text)


def _job_spec(kind: str, config: JudgeConfig, slot: Slot, ref: Reference) -> dict:
    return {
        "kind": kind,
        "device": slot.child_device,
        "model_seed": ref.model_seed,
        "input_seeds": ref.input_seeds,
        "allow_tf32": config.allows_tf32,
        "check_tf32": not config.allows_tf32 and slot.child_device != "cpu",
        "hybrid_allow": list(config.hybrid_allow) if config.mode == "hybrid" else [],
        "warmup": config.warmup,
        "repetitions": config.repetitions,
        "timing_budget_s": config.timing_budget_s,
        "l2_flush_mb": config.l2_flush_mb,
        "time_compile": config.time_compile,
        "cpu_threads": 1,
    }


def _fault_verdict(result: JobResult, config: JudgeConfig) -> tuple[str, str] | None:
    """A verdict from how the child ended, when it did not end normally."""
    if result.timed_out:
        return "timeout", f"exceeded the {config.timeout_s:g} s wall-clock limit"
    if result.memory_killed:
        return "crashed", f"memory limit exceeded ({config.memory_limit_gb:g} GiB RSS)"
    if result.server_lost:
        return "crashed", "the candidate killed its sandbox server"
    if result.signal is not None:
        name = signal.Signals(result.signal).name if result.signal in signal.valid_signals() else ""
        return "crashed", f"killed by signal {result.signal} {name}".strip()
    if result.exit_code not in (0, None):
        return "crashed", f"process exited with code {result.exit_code} before reporting"
    return None


def _read_report(job_dir: Path) -> dict | None:
    try:
        return json.loads((job_dir / "report.json").read_text())
    except (OSError, ValueError):
        return None


def _load_outputs(job_dir: Path) -> dict | None:
    try:
        return torch.load(job_dir / "outputs.pt", weights_only=True)  # not mapped: see docs
    except Exception:  # missing or forged file: the caller rejects
        return None


def _strictness_problem(report: dict, config: JudgeConfig, trials: int) -> str | None:
    """Why the run-time report rules the candidate out, or None."""
    per_trial = report.get("launches_per_trial")
    if not isinstance(per_trial, list) or len(per_trial) != trials:
        return "incomplete run-time report (launch monitor missing or tampered with)"
    if report.get("tampered"):
        return "run-time monitor tampered with: " + "; ".join(report["tampered"])
    if min(per_trial) < 1:
        return "no Triton kernel launched inside forward"
    forbidden = report.get("forbidden_ops") or {}
    if forbidden:
        ops = ", ".join(f"aten.{k} x{v}" for k, v in sorted(forbidden.items()))
        where = "strict mode" if config.mode == "strict" else "hybrid allow-list"
        return f"PyTorch compute in forward outside Triton ({where}): {ops}"
    escapes = report.get("host_escapes") or {}
    if escapes:
        return "host computation escape in forward: " + ", ".join(f"Tensor.{k}" for k in escapes)
    if report.get("tf32_kernels"):
        names = ", ".join(report["tf32_kernels"])
        return f"kernel uses TF32 tensor cores but preset {config.preset} requires fp32: {names}"
    return None


class PhaseClock:
    """Seconds spent per named phase of one verdict (recorded in ``Verdict.phase_s``)."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}

    @contextlib.contextmanager
    def __call__(self, name: str) -> Iterator[None]:
        start = time.monotonic()
        try:
            yield
        finally:
            spent = time.monotonic() - start
            self.seconds[name] = round(self.seconds.get(name, 0.0) + spent, 3)


_NOT_REPRODUCED = (
    "the candidate process's inputs differ from the judge's (the reference's get_inputs() "
    "is not reproducible from a seed, or the run-time report was tampered with)"
)


def judge_pair(
    reference_source: str, candidate_source: str, config: JudgeConfig, slot: Slot
) -> Verdict:
    """The whole judgement of one pair on one slot. Raises only for an invalid reference."""
    t0 = time.monotonic()
    env = dict(slot.environment)
    clock = PhaseClock()
    seed = config.seed if config.seed is not None else secrets.randbits(31)
    seeds = [seed + 1 + k for k in range(config.trials)]
    with clock("reference"):
        ref = run_reference(reference_source, config, slot.judge_device, seeds, seed)

    def verdict(status: str, reason: str = "", **fields) -> Verdict:
        wall_s = time.monotonic() - t0
        return Verdict(
            status, reason, environment=env, wall_s=wall_s, phase_s=clock.seconds, **fields
        )

    if config.static_checks:
        finding = check_source(candidate_source, config.mode)
        if finding:
            return verdict(finding.status, finding.reason)
    work = Path(tempfile.mkdtemp(prefix="cand-", dir=slot.sandbox.scratch))
    try:
        return _judge_in(work, ref, candidate_source, config, slot, verdict, clock)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _judge_in(
    work: Path, ref: Reference, candidate: str, config, slot: Slot, verdict, clock: PhaseClock
) -> Verdict:
    cache = str(work / "triton-cache")
    job_dir = work / "trials"
    spec = _job_spec("candidate", config, slot, ref)
    with clock("write_job"):
        _write_job(job_dir, spec, ref, {"candidate.py": candidate})
    with clock("candidate"):
        result = slot.sandbox.run(str(job_dir), config.timeout_s, cache)
    tail = result.output[-4000:]
    fault = _fault_verdict(result, config)
    report = _read_report(job_dir)
    if fault:
        return verdict(*fault, stdout_tail=tail)
    if report is None:
        return verdict("crashed", "the candidate process ended without a report", stdout_tail=tail)
    if report.get("status") != "ok":
        return verdict(report["status"], report.get("reason", ""), stdout_tail=tail)
    problem = _strictness_problem(report, config, len(ref.input_seeds))
    launches = sum(report.get("launches_per_trial") or [0])
    if problem:
        return verdict("rejected", problem, stdout_tail=tail, triton_launches=launches)
    if report.get("input_fingerprints") != ref.fingerprints:
        return verdict("rejected", _NOT_REPRODUCED, stdout_tail=tail)
    mutated = report.get("inputs_mutated")
    if not isinstance(mutated, list):
        return verdict(
            "rejected", "incomplete run-time report (input check missing)", stdout_tail=tail
        )
    if mutated:
        return verdict(
            "rejected", f"trial {mutated[0]}: forward mutated its inputs", stdout_tail=tail
        )
    with clock("compare"):
        data = _load_outputs(job_dir)
    if not data or len(data.get("outputs", [])) != len(ref.input_seeds):
        return verdict("rejected", "outputs missing or unreadable", stdout_tail=tail)
    worst = Comparison(True, "", 0.0, 0.0)
    for k, (expected, actual) in enumerate(zip(ref.outputs, data["outputs"], strict=True)):
        with clock("compare"):
            cmp = compare_outputs(expected, actual, config, slot.judge_device)
        worst = Comparison(
            cmp.ok,
            cmp.reason,
            max(worst.max_abs_err, cmp.max_abs_err),
            max(worst.max_rel_err, cmp.max_rel_err),
        )
        if not cmp.ok:
            return verdict(
                "incorrect",
                f"trial {k}: {cmp.reason}",
                max_abs_err=worst.max_abs_err,
                max_rel_err=worst.max_rel_err,
                stdout_tail=tail,
                triton_launches=launches,
                trials=k + 1,
            )
    common = dict(
        max_abs_err=worst.max_abs_err,
        max_rel_err=worst.max_rel_err,
        stdout_tail=tail,
        triton_launches=launches,
        trials=len(ref.input_seeds),
    )
    if slot.child_device == "cpu":
        return verdict("correct", "timing unavailable on CPU (Triton interpreter)", **common)
    del data  # the trial outputs can be GBs: free them before the timing runs
    return _time_on_cuda(work, ref, candidate, config, slot, verdict, common, cache, clock)


# ---- timing --------------------------------------------------------------------------------
def _time_on_cuda(work, ref, candidate, config, slot, verdict, common, cache, clock) -> Verdict:
    seed = ref.model_seed + 1000
    seeds = [seed + k for k in range(config.input_sets)]
    with clock("reference"):
        tref = run_reference(ref.source, config, slot.judge_device, seeds, ref.model_seed)
    cand_dir, ref_dir = work / "time-candidate", work / "time-reference"
    spec = _job_spec("candidate_timing", config, slot, tref)
    with clock("write_job"):
        _write_job(cand_dir, spec, tref, {"candidate.py": candidate})
    with clock("candidate_timing"):
        result = slot.sandbox.run(str(cand_dir), config.timeout_s, cache)
    fault = _fault_verdict(result, config)
    if fault:
        return verdict(fault[0], "while timed: " + fault[1], **common)
    report = _read_report(cand_dir) or {"status": "crashed", "reason": "no timing report"}
    if report.get("status") != "ok":
        return verdict(report["status"], "while timed: " + report.get("reason", ""), **common)
    if report.get("input_fingerprints") != tref.fingerprints:
        return verdict("rejected", "while timed: " + _NOT_REPRODUCED, **common)
    with clock("compare"):
        data = _load_outputs(cand_dir)
    if not data or len(data.get("outputs", [])) != len(tref.outputs):
        return verdict("rejected", "outputs after timing missing", **common)
    for expected, actual in zip(tref.outputs, data["outputs"], strict=True):
        with clock("compare"):
            cmp = compare_outputs(expected, actual, config, slot.judge_device)
        if not cmp.ok:
            return verdict("incorrect", f"after timing: {cmp.reason}", **common)
    timing = report["candidate"]
    # Judge-side sanity: the child cannot have spent more device time than wall time.
    if timing["total_event_ms"] / 1e3 > result.wall_s:
        return verdict(
            "rejected", "reported kernel times exceed the wall clock (timer forged)", **common
        )
    del data
    spec = _job_spec("reference_timing", config, slot, tref)
    with clock("write_job"):
        _write_job(ref_dir, spec, tref, {})
    with clock("baselines"):
        ref_cache = str(work / "ref-cache")
        rresult = slot.sandbox.run(str(ref_dir), max(config.timeout_s, 600.0), ref_cache)
    rreport = _read_report(ref_dir) or {}
    eager = (rreport.get("eager") or {}).get("median_ms")
    compiled = (rreport.get("compile") or {}).get("median_ms")
    runtime = timing["median_ms"]
    speedup_eager = eager / runtime if eager and runtime else None
    speedup_compile = compiled / runtime if compiled and runtime else None
    limit = config.suspicious_speedup
    suspicious = any(s is not None and s > limit for s in (speedup_eager, speedup_compile))
    notes = []
    if timing.get("escaped_stream"):
        notes.append("work escaped the timed stream; host wall time used")
    if rresult.timed_out or rreport.get("status", "ok") != "ok":
        notes.append("reference timing failed: " + str(rreport.get("reason", "timeout")))
    if rreport.get("compile_error"):
        notes.append("torch.compile baseline failed: " + rreport["compile_error"][:200])
    if suspicious:
        notes.append(f"speedup above {limit:g}x: inspect")
    return verdict(
        "correct",
        "; ".join(notes),
        runtime_ms=runtime,
        runtime_p20_ms=timing["p20_ms"],
        runtime_p80_ms=timing["p80_ms"],
        eager_ms=eager,
        compile_ms=compiled,
        speedup_eager=speedup_eager,
        speedup_compile=speedup_compile,
        suspicious=suspicious,
        timed_calls=timing.get("repetitions", config.repetitions),
        **common,
    )


def environment_record(config: JudgeConfig, device: str) -> dict:
    """Where results were measured: versions, device, driver, preset, mode, precision."""
    import platform

    import triton

    record = {
        "device": device,
        "device_name": platform.processor() or platform.machine(),
        "driver": None,
        "torch": torch.__version__,
        "triton": triton.__version__,
        "python": platform.python_version(),
        "preset": config.preset,
        "mode": config.mode,
        "precision": config.precision,
        "interpreter": device == "cpu",
        "ptrace_scope": _read_text("/proc/sys/kernel/yama/ptrace_scope"),
    }
    if device.startswith("cuda"):
        record["device_name"] = torch.cuda.get_device_name(torch.device(device))
        record["driver"] = _nvidia_driver()
        record["cuda"] = torch.version.cuda
    return record


def _read_text(path: str) -> str | None:
    with contextlib.suppress(OSError):
        return Path(path).read_text().strip()
    return None


def _nvidia_driver() -> str | None:
    import subprocess

    with contextlib.suppress(Exception):
        out = subprocess.run(
            ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=20,
            env={"PATH": os.environ.get("PATH", "")},
        )
        return out.stdout.strip().splitlines()[0] if out.returncode == 0 else None
    return None
