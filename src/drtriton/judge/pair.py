"""Judge one (reference, candidate) pair on a device slot.

The trusted side of the judge. Nothing here executes program code: the reference runs in a
sandboxed child of its own (a user's reference is untrusted too), which sends back its outputs
(``channel.py``: on CUDA GPU memory, never through the host) and its inputs' fingerprints; the
candidate runs in another fresh child (``worker.py``) on inputs it remakes from the same seeds
and sends back its outputs and its run-time report; everything is compared here. Reference
runs are cached per (source, seeds, device, precision) and baseline timings on disk
(``cache.py``).

Order of decisions: static checks -> candidate child (faults, run-time strictness report) ->
outputs (types, shapes, inputs unchanged, NaN/Inf pattern, tolerance) -> on CUDA, timing of the
candidate and of the reference (eager and ``torch.compile``) in fresh children on the same inputs,
with the candidate's outputs re-verified after timing. Timing holds the slot's GPU exclusively;
other children of the slot (imports, Triton compilation, correctness trials) run side by side,
and a job that compiles before it times (the baselines, convert-time tuning) shares the GPU
until it asks for it alone (``gpu_gate``).
"""

from __future__ import annotations

import ast
import contextlib
import json
import queue
import secrets
import shutil
import signal
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import torch

from drtriton import gpu_gate, provenance
from drtriton.judge.cache import BaselineCache, ReferenceCache, source_key
from drtriton.judge.channel import OutputChannel
from drtriton.judge.compare import Comparison, compare_outputs
from drtriton.judge.config import JudgeConfig
from drtriton.judge.kernel_store import REQUESTS_FILE, KernelCompiler
from drtriton.judge.sandbox import JobResult, Sandbox
from drtriton.judge.static import check_source
from drtriton.judge.verdict import Verdict
from drtriton.judge.worker import PHASE_MARK, REPORT
from drtriton.program import REQUIRED_NAMES, ProgramError, parse_python

REPORT_MAX_BYTES = 16 << 20


class InvalidReferenceError(ProgramError):
    """The reference program cannot be run (bad inputs, forward fails, too slow, ...)."""


@dataclass(frozen=True)
class Reference:
    """A reference run on fixed seeds: outputs (on the judge's device) and, per input seed, the
    inputs' fingerprint (children remake the inputs from the seeds)."""

    source: str
    model_seed: int
    input_seeds: list[int]
    fingerprints: list[list]
    outputs: list[tuple[torch.Tensor, ...]]
    # per trial, per output: oracle - output (float64 run) or None; [] when there is no oracle
    residuals: list[tuple[torch.Tensor | None, ...]] = field(default_factory=list)
    # per trial, per output: how far fp32 rounding of weights and inputs moves the output
    spreads: list[list[float | None]] = field(default_factory=list)
    oracle_note: str = ""  # why there is no oracle, when there is none


def reference_bytes(ref: Reference) -> int:
    """The tensors a reference run keeps (its outputs and oracle residuals), in bytes."""
    tensors = [t for trial in (*ref.outputs, *ref.residuals) for t in trial
               if isinstance(t, torch.Tensor)]
    return sum(t.numel() * t.element_size() for t in tensors)


class GpuLock:
    """Shared for untimed children, exclusive for timing: timing never shares its GPU.

    A gated job (``GpuHold``) starts shared and moves to exclusive only for its timed part, so
    its compiling and warm-up overlap other children. Waiting writers (and an upgrade) keep
    new readers out, so timing is never starved."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._readers = 0
        self._writer = False
        self._waiting_writers = 0
        self._upgrading = False

    def acquire_shared(self) -> None:
        with self._cond:
            while self._writer or self._waiting_writers:
                self._cond.wait()
            self._readers += 1

    def release_shared(self) -> None:
        with self._cond:
            self._readers -= 1
            self._cond.notify_all()

    def acquire_exclusive(self) -> None:
        with self._cond:
            self._waiting_writers += 1
            while self._writer or self._readers:
                self._cond.wait()
            self._waiting_writers -= 1
            self._writer = True

    def release_exclusive(self) -> None:
        with self._cond:
            self._writer = False
            self._cond.notify_all()

    def upgrade(self) -> None:
        """Shared to exclusive. The first upgrader keeps its read while it waits; another one
        gives its read up first (two upgraders holding reads would wait for each other)."""
        with self._cond:
            first = not self._upgrading
            if first:
                self._upgrading = True
            else:
                self._readers -= 1
                self._cond.notify_all()
            self._waiting_writers += 1
            while self._writer or self._readers > int(first):
                self._cond.wait()
            self._waiting_writers -= 1
            if first:
                self._readers -= 1
                self._upgrading = False
            self._writer = True

    def downgrade(self) -> None:
        with self._cond:
            self._writer = False
            self._readers += 1
            self._cond.notify_all()

    @contextlib.contextmanager
    def shared(self) -> Iterator[None]:
        self.acquire_shared()
        try:
            yield
        finally:
            self.release_shared()

    @contextlib.contextmanager
    def exclusive(self) -> Iterator[None]:
        self.acquire_exclusive()
        try:
            yield
        finally:
            self.release_exclusive()


class GpuHold:
    """One job's hold on its slot's ``GpuLock``: ``exclusive``, ``shared`` or ``none``; given the
    job's directory, moved between them at the job's requests (``gpu_gate``)."""

    def __init__(self, lock: GpuLock, state: str = "shared", gate_dir: Path | None = None):
        self._lock = lock
        self._initial, self._state = state, "none"
        self._gate_dir = gate_dir
        self._stop = threading.Event()
        self._watcher: threading.Thread | None = None

    def __enter__(self) -> GpuHold:
        self._set(self._initial)
        if self._gate_dir is not None:
            self._watcher = threading.Thread(target=self._serve, daemon=True)
            self._watcher.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        if self._watcher is not None:
            self._watcher.join()  # a change in progress finishes first
        self._set("none")

    def _serve(self) -> None:
        n = 0
        while not self._stop.wait(gpu_gate.POLL_S):
            request = gpu_gate.request_path(self._gate_dir, n)
            try:
                state = request.read_text().strip()
            except OSError:
                continue
            self._set(state if state in ("exclusive", "none") else "shared")
            with contextlib.suppress(OSError):  # a child killed meanwhile took its folder
                gpu_gate.ack_path(self._gate_dir, n).write_text("")
            n += 1

    def _set(self, state: str) -> None:
        lock, now = self._lock, self._state
        if (now, state) == ("shared", "exclusive"):
            lock.upgrade()
        elif (now, state) == ("exclusive", "shared"):
            lock.downgrade()
        elif state != now:
            if now == "shared":
                lock.release_shared()
            elif now == "exclusive":
                lock.release_exclusive()
            if state == "shared":
                lock.acquire_shared()
            elif state == "exclusive":
                lock.acquire_exclusive()
        self._state = state


@dataclass
class Slot:
    """One device: its sandboxes (children that may run at once), devices and caches."""

    sandboxes: list[Sandbox]
    judge_device: str  # where comparisons run in this process (e.g. cuda:1)
    child_device: str  # the same GPU as the children see it (e.g. cuda)
    environment: dict
    references: ReferenceCache = field(
        default_factory=lambda: ReferenceCache(size=reference_bytes,
                                               remembered=(InvalidReferenceError,)))
    baselines: BaselineCache | None = None
    kernels: KernelCompiler | None = None  # compiles kernels for the store (CUDA)
    gpu: GpuLock = field(default_factory=GpuLock)
    free: queue.Queue = field(default_factory=queue.Queue)

    def __post_init__(self) -> None:
        for box in self.sandboxes:
            self.free.put(box)

    @contextlib.contextmanager
    def sandbox(self) -> Iterator[Sandbox]:
        box = self.free.get()
        try:
            yield box
        finally:
            self.free.put(box)


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


# ---- reference -------------------------------------------------------------------------
def check_reference_source(source: str) -> None:
    """A KernelBench-format reference defines Model, get_inputs and get_init_inputs (read with
    ``ast``: the source itself runs only in the sandbox)."""
    try:
        tree = parse_python(source)
    except SyntaxError as exc:
        raise ProgramError(f"reference: syntax error: {exc.msg} (line {exc.lineno})") from exc
    defined: set[str] = set()
    for node in tree.body:
        if isinstance(node, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            defined.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            defined |= {t.id for t in targets if isinstance(t, ast.Name)}
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            defined |= {(a.asname or a.name).split(".")[0] for a in node.names}
    missing = [n for n in REQUIRED_NAMES if n not in defined]
    if missing:
        raise ProgramError(f"reference: missing {', '.join(missing)} (KernelBench format)")


@contextlib.contextmanager
def _reference_job(
    kind: str, source: str, fields: dict, config: JudgeConfig, slot: Slot, box: Sandbox,
    what: str, gated: bool = False,
) -> Iterator[tuple[dict, torch.Tensor | None]]:
    """Run a job over the (untrusted) reference in a child of ``box`` under the reference's time
    limit; yield its report and the outputs it sent, or raise ``InvalidReferenceError`` (prefixed by
    ``what``) naming the phase that failed. ``gated``: the child times something, and has the GPU
    alone when it asks (``gpu_gate``). The directory is removed afterwards."""
    check_reference_source(source)
    work = Path(tempfile.mkdtemp(prefix=f"{kind}-", dir=box.scratch))
    try:
        spec = {**_job_spec(kind, config, slot), **fields, "gpu_gate": gated}
        # a gated child (the compiler's) starts on the host alone and asks for the GPU
        holds = ["none"] if gated else ["shared", "exclusive"]
        for attempt, state in enumerate(holds):
            job_dir = work / f"{kind}-{attempt}"
            _write_job(job_dir, spec, source, {})
            gate_dir = job_dir if gated else None
            with GpuHold(slot.gpu, state, gate_dir), _outputs(job_dir, slot) as channel:
                result = box.run(str(job_dir), config.reference_timeout_s, str(work / "cache"))
            report = read_report(job_dir)
            if not _short_of_gpu_memory(report, channel, slot):
                break
        lost = _lost_outputs(report, channel)
        if result.timed_out or result.memory_killed or result.server_lost or report is None:
            why = _fault_verdict(result, config.reference_timeout_s, config)
            raise InvalidReferenceError(what + (why[1] if why else "ended without a report") + lost)
        if report.get("status") != "ok":
            raise InvalidReferenceError(what + str(report.get("reason", "")) + lost)
        if channel.blob is None and lost:
            raise InvalidReferenceError(what + "its outputs could not be read back" + lost)
        yield report, channel.blob
    finally:
        shutil.rmtree(work, ignore_errors=True)


def run_reference(
    source: str,
    config: JudgeConfig,
    slot: Slot,
    seeds: list[int],
    model_seed: int,
    box: Sandbox,
) -> Reference:
    """Run ``Model`` (built under ``model_seed``) on inputs made under each of ``seeds``, in a
    child of ``box``; raise ``InvalidReferenceError`` naming the phase that failed."""
    fields = {"model_seed": model_seed, "input_seeds": list(seeds)}
    with _reference_job("reference", source, fields, config, slot, box, "reference: ") as (
        report, blob
    ):
        trials = _load_outputs(blob, report)
        if trials is None or len(trials) != len(seeds):
            raise InvalidReferenceError("reference: its outputs could not be read back")
        outputs = [tuple(t.to(slot.judge_device) for t in trial) for trial in trials]
        residuals = _load_outputs(blob, report, "oracle_residuals") or []
    note = "" if residuals else str(report.get("oracle_error") or "no float64 oracle")
    if len(residuals) != len(seeds):
        residuals = []
    spreads = report.get("oracle_spreads") if residuals else None
    if not isinstance(spreads, list) or len(spreads) != len(seeds):
        spreads = []
    return Reference(source, model_seed, list(seeds), report["input_fingerprints"], outputs,
                     residuals, spreads, note)


def run_call(
    source: str, function: str, arguments: dict, config: JudgeConfig, slot: Slot, box: Sandbox,
    phase: str, gated: bool = False,
) -> dict:
    """``function(source, **arguments)`` (project code, "module:name") in a child of ``box``,
    bounded by ``config.reference_timeout_s``: for work that runs a user's reference, such as
    the compiler's capture. ``gated``: it times something (convert-time tuning), and nothing
    else runs on its GPU while it does (``gpu_gate``). Raises ``InvalidReferenceError`` naming
    the phase that failed."""
    fields = {"function": function, "arguments": arguments, "phase": phase}
    with _reference_job("call", source, fields, config, slot, box, "", gated) as (report, _):
        return report["result"]


def _cached_reference(
    source: str, config: JudgeConfig, slot: Slot, seeds: list[int], model_seed: int,
    box: Sandbox,
) -> tuple[Reference, bool]:
    key = (source_key(source), model_seed, tuple(seeds), slot.judge_device, config.allows_tf32)
    return slot.references.get(
        key, lambda: run_reference(source, config, slot, seeds, model_seed, box)
    )


# ---- jobs ----------------------------------------------------------------------------------
def _write_job(job_dir: Path, job: dict, reference_source: str, files: dict) -> None:
    """The job directory: spec, the reference (it makes the inputs) and sources.

    No inputs: the child remakes them from ``job["input_seeds"]`` with the reference's
    ``get_inputs`` on its GPU (GBs at GPU scale took tens of seconds to write and read back).
    """
    job_dir.mkdir(parents=True)
    (job_dir / "job.json").write_text(json.dumps(job))
    (job_dir / "reference.py").write_text(reference_source)
    for name, text in files.items():
        (job_dir / name).write_text(text)


def _job_spec(kind: str, config: JudgeConfig, slot: Slot, ref: Reference | None = None) -> dict:
    spec = {
        "kind": kind,
        "outputs_nonce": secrets.token_hex(16),
        "device": slot.child_device,
        "allow_tf32": config.allows_tf32,
        "oracle": config.precision_parity,
        "hybrid_allow": list(config.hybrid_allow) if config.mode == "hybrid" else [],
        **_timing_settings(config),
        "cpu_threads": 1,
    }
    if ref is not None:
        spec.update(model_seed=ref.model_seed, input_seeds=ref.input_seeds)
    if slot.kernels is not None:
        spec["kernel_store"] = slot.kernels.store.root
    return spec


def _timing_settings(config: JudgeConfig) -> dict:
    """How the children time (their job spec's fields), and so what a cached baseline is
    keyed by."""
    return {
        "warmup_s": config.warmup_s,
        "max_timed_calls": config.repetitions,
        "timing_budget_s": config.timing_budget_s,
        "l2_flush_mb": config.l2_flush_mb,
        "input_sets": config.input_sets,
        "time_compile": config.time_compile,
    }


def _last_phase(output: str) -> str:
    for line in reversed(output.splitlines()):
        if line.startswith(PHASE_MARK):
            return line[len(PHASE_MARK) :].strip()[:80]
    return ""


def _fault_verdict(result: JobResult, timeout_s: float, config: JudgeConfig):
    """(status, reason) from how the child ended, when it did not end normally; else None."""
    phase = _last_phase(result.output)
    where = f" in {phase}" if phase else ""
    if result.timed_out:
        return "timeout", f"exceeded the {timeout_s:g} s wall-clock limit{where}"
    if result.memory_killed:
        limit = result.memory_limit_gb
        return "crashed", f"memory limit exceeded ({limit:g} GiB RSS){where}"
    if result.server_lost:
        return "crashed", f"the candidate killed its sandbox server{where}"
    if result.signal is not None:
        name = signal.Signals(result.signal).name if result.signal in signal.valid_signals() else ""
        return "crashed", f"killed by signal {result.signal} {name}{where}".replace("  ", " ")
    if result.exit_code not in (0, None):
        return "crashed", f"process exited with code {result.exit_code} before reporting{where}"
    return None


def read_report(job_dir: Path) -> dict | None:
    """The child's report: a Python literal (parsed, never executed), or None."""
    path = job_dir / REPORT
    try:
        if path.stat().st_size > REPORT_MAX_BYTES:
            return None
        report = ast.literal_eval(parse_python(path.read_text(), mode="eval"))
    except (OSError, ValueError, SyntaxError, MemoryError, RecursionError):
        return None
    return report if isinstance(report, dict) else None


@contextlib.contextmanager
def _outputs(job_dir: Path, slot: Slot) -> Iterator[OutputChannel]:
    """Listen for the outputs of the job in ``job_dir`` while it runs (see ``channel.py``)."""
    nonce = json.loads((job_dir / "job.json").read_text())["outputs_nonce"]
    channel = OutputChannel(job_dir, nonce, slot.judge_device)
    try:
        yield channel
    finally:
        channel.close()


def _load_outputs(blob: torch.Tensor | None, report: dict, key: str = "trial_outputs"
                  ) -> list[tuple[torch.Tensor, ...]] | None:
    """The trials' outputs (``report[key]``: indices per trial, None for an absent one) as views
    of ``blob`` (the bytes the child sent, in the judge's own memory: nothing left running can
    change them), laid out as the report says."""
    if blob is None or key not in report:
        return None
    try:
        specs, trials = report["outputs"], report[key]
        tensors = [_tensor_from(blob, *spec) for spec in specs]
        return [tuple(None if i is None else tensors[i] for i in trial) for trial in trials]
    except (KeyError, TypeError, ValueError, IndexError, RuntimeError):
        return None


def _tensor_from(blob: torch.Tensor, dtype: str, shape: list, offset: int, nbytes: int):
    kind = getattr(torch, str(dtype).removeprefix("torch."), None)
    if not isinstance(kind, torch.dtype):
        raise ValueError(f"bad output record {dtype} {shape}")
    size = torch.empty((), dtype=kind).element_size()
    count = 1
    for d in shape:
        count *= int(d)
    if offset < 0 or offset % size or offset + nbytes > blob.numel() or nbytes != count * size:
        raise ValueError(f"bad output record {dtype} {shape}")
    return blob.narrow(0, offset, nbytes).view(kind).reshape([int(d) for d in shape])


def _strictness_problem(report: dict, config: JudgeConfig, trials: int | None) -> str | None:
    """Why the run-time report rules the candidate out, or None."""
    if report.get("tampered"):
        return "run-time checks tampered with: " + "; ".join(map(str, report["tampered"]))[:500]
    if trials is not None:
        per_trial = report.get("launches_per_trial")
        if not isinstance(per_trial, list) or len(per_trial) != trials:
            return "incomplete run-time report (launch monitor missing or tampered with)"
        if min(per_trial) < 1:
            return "no Triton kernel launched inside forward"
    forbidden = report.get("forbidden_ops")
    if not isinstance(forbidden, dict):
        return "incomplete run-time report (op record missing)"
    if forbidden:
        ops = ", ".join(f"aten.{k} x{v}" for k, v in sorted(forbidden.items()))
        where = "strict mode" if config.mode == "strict" else "hybrid allow-list"
        return f"PyTorch compute in forward outside Triton ({where}): {ops}"
    escapes = report.get("host_escapes") or {}
    if escapes:
        return "host computation escape in forward: " + ", ".join(f"Tensor.{k}" for k in escapes)
    return None


_NOT_REPRODUCED = (
    "the candidate process's inputs differ from the judge's (the reference's get_inputs() "
    "is not reproducible from a seed, or the candidate changed how inputs are made)"
)


class _Run:
    """The state of one verdict: its clock, the seeds, the reference, and how to finish it."""

    def __init__(self, config: JudgeConfig, slot: Slot, box: Sandbox) -> None:
        self.t0 = time.monotonic()
        self.config, self.slot, self.box = config, slot, box
        self.clock = PhaseClock()
        self.cache_hits: list[str] = []
        self.kernels: dict[str, dict[str, int]] = {}

    def note_child(self, job: str, report: dict | None) -> None:
        """Keep a child's own phase split (``candidate/forward``...) in the verdict's."""
        for name, seconds in ((report or {}).get("phase_s") or {}).items():
            if isinstance(seconds, (int, float)):
                self.clock.seconds[f"{job}/{name}"] = seconds
        store = (report or {}).get("kernel_store")
        if isinstance(store, dict):
            counts = {k: store[k] for k in ("loaded", "compiled") if isinstance(store.get(k), int)}
            self.kernels[job] = counts
            if counts.get("loaded"):
                self.cache_hits.append(f"{job}:kernels")

    def verdict(self, status: str, reason: str = "", **fields) -> Verdict:
        return Verdict(
            status,
            reason,
            environment=dict(self.slot.environment),
            wall_s=time.monotonic() - self.t0,
            phase_s=self.clock.seconds,
            cache_hits=list(self.cache_hits),
            kernels=dict(self.kernels),
            **fields,
        )


def judge_pair(
    reference_source: str,
    candidate_source: str,
    config: JudgeConfig,
    slot: Slot,
    seed: int | None = None,
) -> Verdict:
    """The whole judgement of one pair on one slot. Raises only for an invalid reference.

    ``seed`` (else ``config.seed``, else a fresh random one) decides the model and input seeds;
    candidates judged with one seed share one reference run. The verdict holds one of the
    slot's sandboxes throughout: its jobs' files live in that sandbox's scratch directory, the
    only one its children can write (or see).
    """
    with slot.sandbox() as box:
        run = _Run(config, slot, box)
        return _judge_pair(reference_source, candidate_source, config, run, seed)


def _judge_pair(reference_source: str, candidate_source: str, config: JudgeConfig, run: _Run,
                seed: int | None) -> Verdict:
    slot = run.slot
    if seed is None:
        seed = config.seed if config.seed is not None else secrets.randbits(31)
    seeds = [seed + 1 + k for k in range(config.trials)]
    with run.clock("reference"):
        ref, hit = _cached_reference(reference_source, config, slot, seeds, seed, run.box)
    if hit:
        run.cache_hits.append("reference")
    if config.static_checks:
        finding = check_source(candidate_source, config.mode)
        if finding:
            return run.verdict(finding.status, finding.reason)
    work = Path(tempfile.mkdtemp(prefix="cand-", dir=run.box.scratch))
    try:
        return _judge_in(work, ref, candidate_source, run)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _gpu_out_of_memory(report: dict | None, slot: Slot) -> bool:
    """Whether a child that shared its GPU ran out of GPU memory. Other jobs on the GPU hold
    memory too (eight references of a few GiB each fill an H200), so such a child runs once
    more with the GPU alone before its verdict is the program's."""
    report = report or {}
    crashed = report.get("status") == "crashed" and "CUDA out of memory" in str(
        report.get("reason", ""))
    unsent = "out of memory" in str(report.get("outputs_error", "")).lower()  # its copy to send
    return slot.child_device != "cpu" and (crashed or unsent)


def _lost_outputs(report: dict | None, channel: OutputChannel) -> str:
    """'; why the outputs did not arrive' (the child could not send them, or the judge could not
    take them), or '' when nothing went wrong on the way."""
    sent = str((report or {}).get("outputs_error") or "")
    return ((f"; the child could not send its outputs: {sent}" if sent else "")
            + (f"; the judge could not take its outputs: {channel.error}" if channel.error else ""))


def _short_of_gpu_memory(report: dict | None, channel: OutputChannel, slot: Slot) -> bool:
    """Whether a job that shared its GPU ran out of its memory: in the child, or in the judge's
    own copy of the child's outputs (both on the GPU the other jobs share)."""
    taking = slot.child_device != "cpu" and "out of memory" in channel.error.lower()
    return _gpu_out_of_memory(report, slot) or taking


def _run_job(run: _Run, job_dir: Path, cache: str, exclusive: bool = False
             ) -> tuple[JobResult, torch.Tensor | None, bool]:
    """Run a candidate job; (how it ended, the outputs it sent, whether the GPU's memory ran
    out, in the child or in the judge's copy of its outputs)."""
    hold = GpuHold(run.slot.gpu, "exclusive" if exclusive else "shared")
    with hold, _outputs(job_dir, run.slot) as channel:
        result = run.box.run(str(job_dir), run.config.timeout_s, cache)
    return result, channel.blob, _short_of_gpu_memory(read_report(job_dir), channel, run.slot)


def _judge_in(work: Path, ref: Reference, candidate: str, run: _Run) -> Verdict:
    config, slot, clock = run.config, run.slot, run.clock
    cache = str(work / "triton-cache")
    job_dir = work / "trials"
    with clock("write_job"):
        _write_job(job_dir, _job_spec("candidate", config, slot, ref), ref.source,
                   {"candidate.py": candidate})
    with clock("candidate"):
        result, blob, short_of_memory = _run_job(run, job_dir, cache)
        if short_of_memory:
            del blob
            job_dir = work / "trials-alone"
            _write_job(job_dir, _job_spec("candidate", config, slot, ref), ref.source,
                       {"candidate.py": candidate})
            result, blob, _ = _run_job(run, job_dir, cache, exclusive=True)
    if slot.kernels is not None:
        slot.kernels.submit(job_dir / REQUESTS_FILE)
    tail = result.output[-4000:]
    report, problem = _child_outcome(run, "candidate", result, job_dir, ref,
                                     len(ref.input_seeds))
    launches = sum((report or {}).get("launches_per_trial") or [0])
    if problem:
        return run.verdict(*problem, stdout_tail=tail, triton_launches=launches)
    mutated = report.get("inputs_mutated")
    if not isinstance(mutated, list):
        return run.verdict(
            "rejected", "incomplete run-time report (input check missing)", stdout_tail=tail
        )
    if mutated:
        return run.verdict(
            "rejected", f"trial {mutated[0]}: forward mutated its inputs", stdout_tail=tail
        )
    with clock("compare"):
        trials = _load_outputs(blob, report)
        del blob
        worst, failed = _compare_trials(run, ref, trials)
    if worst is None:
        why = str(report.get("outputs_error") or "")
        return run.verdict("rejected", "outputs missing or unreadable"
                           + (f" (not sent: {why})" if why else ""), stdout_tail=tail)
    if failed is not None:
        return run.verdict(
            "incorrect",
            f"trial {failed}: {worst.reason}",
            stdout_tail=tail,
            triton_launches=launches,
            trials=failed + 1,
            **_errors(worst, ref, run.config),
        )
    common = dict(
        **_errors(worst, ref, run.config),
        stdout_tail=tail,
        triton_launches=launches,
        trials=len(ref.input_seeds),
    )
    if slot.child_device == "cpu":
        return run.verdict("correct", "timing unavailable on CPU (Triton interpreter)", **common)
    del trials  # the trial outputs can be GBs: free them before the timing runs
    return _time_on_cuda(run, ref, _Passed(candidate, work, cache, common))


def _errors(cmp: Comparison, ref: Reference, config: JudgeConfig) -> dict:
    """A verdict's error fields: tolerance errors, errors against the float64 oracle."""
    note = "" if ref.residuals or not config.precision_parity else ref.oracle_note
    return dict(max_abs_err=cmp.max_abs_err, max_rel_err=cmp.max_rel_err,
                oracle_err=cmp.oracle_err, reference_oracle_err=cmp.reference_oracle_err,
                oracle_note=note)


_CHILD_STATUSES = ("incorrect", "rejected", "compile_error", "runtime_error", "timeout", "crashed")


def _child_outcome(
    run: _Run, job: str, result: JobResult, job_dir: Path, ref: Reference, trials: int | None
) -> tuple[dict | None, tuple[str, str] | None]:
    """A candidate child's report and, when something rules it out, (status, reason): how it
    ended, its own status, the run-time checks, the inputs' fingerprints."""
    config = run.config
    fault = _fault_verdict(result, config.timeout_s, config)
    report = read_report(job_dir)
    run.note_child(job, report)
    if fault:
        return report, fault
    if report is None:
        return None, ("crashed", "the candidate process ended without a report")
    if report.get("status") != "ok":
        status = report.get("status")
        status = status if status in _CHILD_STATUSES else "rejected"
        return report, (status, str(report.get("reason", "")))
    problem = _strictness_problem(report, config, trials)
    if problem:
        return report, ("rejected", problem)
    if report.get("input_fingerprints") != ref.fingerprints:
        return report, ("rejected", _NOT_REPRODUCED)
    return report, None


def _compare_trials(
    run: _Run, ref: Reference, trials: list | None
) -> tuple[Comparison | None, int | None]:
    """(the worst comparison so far, the first trial out of tolerance or None); (None, None)
    when the outputs are missing. Errors against the float64 oracle are the worst seen."""
    if trials is None or len(trials) != len(ref.outputs):
        return None, None
    worst = Comparison(True, "", 0.0, 0.0)
    for k, (expected, actual) in enumerate(zip(ref.outputs, trials, strict=True)):
        residuals = ref.residuals[k] if ref.residuals else None
        spreads = ref.spreads[k] if ref.spreads else None
        cmp = compare_outputs(expected, list(actual), run.config, run.slot.judge_device, residuals,
                              spreads)
        oracle = max(((c.oracle_err, c.reference_oracle_err) for c in (worst, cmp)
                      if c.oracle_err is not None), default=(None, None))
        worst = Comparison(cmp.ok, cmp.reason, max(worst.max_abs_err, cmp.max_abs_err),
                           max(worst.max_rel_err, cmp.max_rel_err), *oracle)
        if not cmp.ok:
            return worst, k
    return worst, None


# ---- timing --------------------------------------------------------------------------------
@dataclass(frozen=True)
class _Passed:
    """A candidate that passed its correctness trials: its source, its work directory and
    Triton cache (shared with the timing child), and the verdict's fields so far."""

    source: str
    work: Path
    cache: str
    fields: dict


def _time_on_cuda(run: _Run, ref: Reference, passed: _Passed) -> Verdict:
    config, slot, clock = run.config, run.slot, run.clock
    work, candidate, cache, common = passed.work, passed.source, passed.cache, passed.fields
    seed = ref.model_seed + 1000
    seeds = [seed + k for k in range(config.input_sets)]
    with clock("reference"):
        tref, hit = _cached_reference(ref.source, config, slot, seeds, ref.model_seed, run.box)
    if hit:
        run.cache_hits.append("timing_reference")
    cand_dir = work / "time-candidate"
    with clock("write_job"):
        _write_job(cand_dir, _job_spec("candidate_timing", config, slot, tref), ref.source,
                   {"candidate.py": candidate})
    with clock("candidate_timing"):
        result, blob, _ = _run_job(run, cand_dir, cache, exclusive=True)
    report, problem = _child_outcome(run, "candidate_timing", result, cand_dir, tref, None)
    if problem:
        return run.verdict(problem[0], "while timed: " + problem[1], **common)
    with clock("compare"):
        worst, failed = _compare_trials(run, tref, _load_outputs(blob, report))
        del blob
    if worst is None:
        return run.verdict("rejected", "outputs after timing missing", **common)
    if failed is not None:
        return run.verdict("incorrect", f"after timing: {worst.reason}", **common)
    timing = report.get("candidate") or {}
    # Judge-side sanity: the child cannot have spent more device time than wall time.
    if float(timing.get("total_event_ms", 0.0)) / 1e3 > result.wall_s:
        return run.verdict(
            "rejected", "reported kernel times exceed the wall clock (timer forged)", **common
        )
    with clock("baselines"):
        baselines = _baselines(work, tref, run)
    return _timed_verdict(run, timing, baselines, common)


def _baselines(work: Path, tref: Reference, run: _Run) -> dict:
    """Eager and torch.compile timings of the reference: from the disk cache, else measured in
    a child that never runs candidate code (and stored when both succeeded)."""
    config, slot = run.config, run.slot
    store = slot.baselines
    key = BaselineCache.key(tref.source, slot.environment, _timing_settings(config))
    if store is not None and not config.fresh_baselines:
        cached = store.load(key)
        if cached is not None:
            run.cache_hits.append("baselines")
            return cached
    ref_dir = work / "time-reference"
    spec = {**_job_spec("reference_timing", config, slot, tref), "gpu_gate": True}
    _write_job(ref_dir, spec, tref.source, {})
    with GpuHold(slot.gpu, "shared", ref_dir):  # compiles sharing the GPU, times it alone
        result = run.box.run(str(ref_dir), config.baseline_timeout_s, str(work / "ref-cache"))
    report = read_report(ref_dir) or {}
    run.note_child("baselines", report)
    record = {key: report.get(key) for key in ("eager", "compile", "compile_error")}
    if result.timed_out or report.get("status", "missing") != "ok":
        record["error"] = str(report.get("reason") or _last_phase(result.output) or "timeout")
    elif store is not None and record.get("eager") and (record.get("compile") or
                                                        not config.time_compile):
        store.store(key, {**record, "environment": slot.environment})
    return record


def _timed_verdict(run: _Run, timing: dict, baselines: dict, common: dict) -> Verdict:
    config = run.config
    eager = (baselines.get("eager") or {}).get("median_ms")
    compiled = (baselines.get("compile") or {}).get("median_ms")
    runtime = timing["median_ms"]
    speedup_eager = eager / runtime if eager and runtime else None
    speedup_compile = compiled / runtime if compiled and runtime else None
    limit = config.suspicious_speedup
    suspicious = any(s is not None and s > limit for s in (speedup_eager, speedup_compile))
    notes = []
    if timing.get("escaped_stream"):
        notes.append("work escaped the timed stream; host wall time used")
    if baselines.get("error"):
        notes.append("reference timing failed: " + baselines["error"])
    if baselines.get("compile_error"):
        notes.append("torch.compile baseline failed: " + str(baselines["compile_error"])[:200])
    if suspicious:
        notes.append(f"speedup above {limit:g}x: inspect")
    return run.verdict(
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
        timed_calls=timing.get("repetitions", 0),
        baselines_measured=str(baselines.get("measured") or "now"),
        **common,
    )


def environment_record(config: JudgeConfig, device: str, sandbox: str | None = None) -> dict:
    """Where results were measured: versions, device, driver, preset, mode, precision, and the
    isolation that untrusted code ran under (default: what a pool made now would use)."""
    import platform

    if sandbox is None:
        from drtriton.judge import isolation

        binary = isolation.bwrap_path()
        sandbox = isolation.describe(binary if binary and not isolation.probe(binary) else None)
    gpu = provenance.gpu_record(device)
    if not device.startswith("cuda"):
        gpu["device_name"] = platform.processor() or platform.machine()  # as verdicts had it
    return {
        "device": device,
        **gpu,
        **provenance.library_versions(("torch", "triton")),
        "python": platform.python_version(),
        "preset": config.preset,
        "mode": config.mode,
        "precision": config.precision,
        "interpreter": device == "cpu",
        "sandbox": sandbox,
        "ptrace_scope": _read_text("/proc/sys/kernel/yama/ptrace_scope"),
    }


def _read_text(path: str) -> str | None:
    with contextlib.suppress(OSError):
        return Path(path).read_text().strip()
    return None
