"""What runs inside one sandboxed child process: a candidate's trials, or a timing job.

The judge writes a job directory (``job.json`` with the input seeds, ``init.pt``, the reference
and the program source); the fork server (``server.py``) forks a child that calls ``run_job``
there. The child remakes the inputs from the seeds with the reference's ``get_inputs`` on its
device (the reference is loaded before the candidate; the judge checks their fingerprints), and
writes ``report.json`` and, for candidates, ``outputs.pt``; the judge reads them after the child
exited.
The reference's outputs never enter a candidate process: comparison happens in the judge.

Everything this module needs is bound at import time, in the fork server, before any candidate
code runs, so a candidate that patches ``builtins`` or ``torch`` later cannot swap them.
"""

from __future__ import annotations

import json
import os
import statistics
import threading
import time
import traceback
import types
from collections.abc import Callable

import torch

from drtriton.judge.monitor import Monitor
from drtriton.program import fingerprint, make_inputs

_Tensor = torch.Tensor
_type = type
_isinstance = isinstance
_perf_counter = time.perf_counter
_json_dump = json.dump
_torch_save = torch.save
_torch_load = torch.load
_equal = torch.equal


def run_job(job_dir: str) -> int:
    """Entry point in the child. Returns the exit code (the report says what happened)."""
    with open(os.path.join(job_dir, "job.json")) as f:
        job = json.load(f)
    report: dict = {"kind": job["kind"], "status": "ok", "reason": ""}
    try:
        if job["kind"] == "candidate":
            _run_candidate(job, job_dir, report)
        elif job["kind"] == "candidate_timing":
            _run_candidate_timing(job, job_dir, report)
        elif job["kind"] == "reference_timing":
            _run_reference_timing(job, job_dir, report)
        else:
            raise ValueError(f"unknown job kind {job['kind']}")
    except _Failure as failure:
        report.update(status=failure.status, reason=failure.reason)
    except SystemExit as exc:
        report.update(status="crashed", reason=f"candidate called sys.exit({exc.code!r})")
    except BaseException as exc:  # any other failure of candidate code is a runtime error
        report.update(_classify_exception(exc, "forward"))
    _write_report(job_dir, report)
    return 0


class _Failure(Exception):
    def __init__(self, status: str, reason: str) -> None:
        super().__init__(reason)
        self.status = status
        self.reason = reason


def _classify_exception(exc: BaseException, phase: str) -> dict:
    text = f"{_type(exc).__name__}: {exc}"
    if _isinstance(exc, MemoryError) or "can't allocate memory" in text or "out of memory" in text:
        return {"status": "crashed", "reason": f"memory limit exceeded in {phase}: {text[:300]}"}
    if "CompilationError" in _type(exc).__name__:
        return {"status": "compile_error", "reason": f"Triton compilation: {text[:500]}"}
    tail = traceback.format_exc(limit=-3)[-1500:]
    return {"status": "runtime_error", "reason": f"{phase}: {text[:500]}", "traceback": tail}


def _write_report(job_dir: str, report: dict) -> None:
    with open(os.path.join(job_dir, "report.json"), "w") as f:
        _json_dump(report, f)


# ---- loading ---------------------------------------------------------------------------
def _setup(job: dict) -> torch.device:
    device = torch.device(job["device"])
    if device.type == "cuda":
        torch.cuda.set_device(device)
        torch.backends.cuda.matmul.allow_tf32 = job["allow_tf32"]
        torch.backends.cudnn.allow_tf32 = job["allow_tf32"]
    else:
        torch.set_num_threads(job.get("cpu_threads", 1))
    return device


def _load_source(path: str, name: str) -> types.ModuleType:
    with open(path) as f:
        source = f.read()
    module = types.ModuleType(name)
    module.__file__ = path
    try:
        exec(compile(source, path, "exec"), module.__dict__)
    except SystemExit:
        raise
    except BaseException as exc:
        raise _Failure("compile_error", f"importing {name}: {_type(exc).__name__}: {exc}") from exc
    return module


def _clones(values: list) -> list:
    # Fresh copies: the candidate never touches the pristine inputs kept for the mutation check.
    return [v.clone() if _isinstance(v, _Tensor) else v for v in values]


def _input_maker(job: dict, device: torch.device) -> Callable[[int], list]:
    """Inputs from the trusted reference's ``get_inputs`` under a seed, on this GPU (the judge
    made the same ones; the report's fingerprints let it check). Loaded before the candidate."""
    reference = _load_source("reference.py", "reference_inputs")
    return lambda seed: make_inputs(reference, seed, device)


def _build(module: types.ModuleType, cls_name: str, job: dict, device: torch.device):
    cls = getattr(module, cls_name, None)
    if cls is None:
        raise _Failure("compile_error", f"program defines no {cls_name}")
    init = _torch_load("init.pt", weights_only=True)
    torch.manual_seed(job["model_seed"])  # same seed as the reference: parameters match
    try:
        return cls(*init).to(device)
    except SystemExit:
        raise
    except BaseException as exc:
        raise _Failure(**_classify_exception(exc, f"{cls_name}.__init__")) from exc


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


# ---- output checks ---------------------------------------------------------------------
def _plain_outputs(out: object, inputs: list, device: torch.device) -> list[torch.Tensor]:
    """The forward result as plain tensors, or a rejection saying why not."""
    items = [out] if _isinstance(out, _Tensor) else out
    if not _isinstance(items, (tuple, list)) or not items:
        raise _Failure("rejected", f"forward returned {_type(out).__name__}, not tensors")
    for t in items:
        if _type(t) is not _Tensor:
            raise _Failure(
                "rejected", f"forward returned a {_type(t).__name__}, not a plain Tensor"
            )
        if t.device.type != device.type:
            raise _Failure("incorrect", f"output on {t.device}, expected {device.type}")
    spans = [_span(x) for x in inputs if _isinstance(x, _Tensor) and x.numel()]
    for t in items:
        if t.numel() and any(_overlaps(_span(t), s) for s in spans):
            raise _Failure("rejected", "an output aliases an input")
    return list(items)


def _span(t: torch.Tensor) -> tuple[int, int]:
    storage = t.untyped_storage()
    return storage.data_ptr(), storage.data_ptr() + storage.nbytes()


def _overlaps(a: tuple[int, int], b: tuple[int, int]) -> bool:
    return a[0] < b[1] and b[0] < a[1]


_LIBRARY_DIRS = tuple(
    os.path.dirname(os.path.abspath(m.__file__)) + os.sep for m in (torch, __import__("triton"))
)


def _new_threads(before: set) -> list[str]:
    """Threads started since ``before`` and still alive, except torch's or triton's own
    (identified by where their target function is defined; anything else counts)."""
    found = []
    for thread in threading.enumerate():
        if thread in before or not thread.is_alive():
            continue
        code = getattr(getattr(thread, "_target", None), "__code__", None)
        if code is not None and os.path.abspath(code.co_filename).startswith(_LIBRARY_DIRS):
            continue
        found.append(thread.name)
    return found


def _same_layout(a: list, b: list) -> bool:
    if len(a) != len(b):
        return False
    for x, y in zip(a, b, strict=True):
        if _isinstance(x, _Tensor) != _isinstance(y, _Tensor):
            return False
        if _isinstance(x, _Tensor) and (x.shape != y.shape or x.dtype != y.dtype):
            return False
    return True


def _unchanged(before: list, after: list) -> bool:
    """Inputs after forward equal the pristine ones (NaN where NaN was), compared on the device."""
    for b, a in zip(before, after, strict=True):
        if _isinstance(b, _Tensor):
            if _type(a) is not _Tensor or a.shape != b.shape or a.dtype != b.dtype:
                return False
            if not _equal(a.nan_to_num(), b.nan_to_num()) or not _equal(a.isnan(), b.isnan()):
                return False
    return True


def _host_copy(tensors: list) -> list:
    return [t.detach().to("cpu", copy=True) if _isinstance(t, _Tensor) else t for t in tensors]


# ---- candidate correctness -------------------------------------------------------------
def _run_candidate(job: dict, job_dir: str, report: dict) -> None:
    device = _setup(job)
    monitor = Monitor(tuple(job["hybrid_allow"]), check_tf32=job["check_tf32"])
    monitor.install()  # before the candidate exists
    make = _input_maker(job, device)
    module = _load_source("candidate.py", "candidate")
    model = _build(module, "ModelNew", job, device)
    threads_before = set(threading.enumerate())
    outputs, mutated, per_trial, prints = [], [], [], []
    first: list = []
    seeds = job["input_seeds"]
    for k, seed in enumerate(seeds):
        trial = make(seed)  # pristine: the candidate gets clones
        prints.append(fingerprint(trial))
        xs = _clones(trial)
        if k == 0:
            first = xs
        elif k == len(seeds) - 1 and _same_layout(first, xs):
            # The last trial reuses trial 0's tensors (same objects, same pointers) refilled
            # with new values: an answer cached by pointer or identity is now stale.
            for old, new in zip(first, xs, strict=True):
                if _isinstance(old, _Tensor):
                    old.copy_(new)
            xs = [
                new if not _isinstance(new, _Tensor) else old
                for old, new in zip(first, xs, strict=True)
            ]
        launches_before = monitor.launches
        with torch.no_grad(), monitor.watch():
            out = model(*xs)
            _sync(device)
        per_trial.append(monitor.launches - launches_before)
        outputs.append(_host_copy(_plain_outputs(out, xs, device)))
        # Checked here rather than shipped to the judge: a copy of every input per trial was
        # the bulk of what crossed the process boundary, and a forged copy would pass as well
        # as a forged answer (in-process checks are defence in depth; see monitor.py).
        if not _unchanged(trial, xs):
            mutated.append(k)
        del trial
        if _new_threads(threads_before):
            raise _Failure("rejected", "forward left background threads running")
    report.update(
        monitor.report(),
        launches_per_trial=per_trial,
        inputs_mutated=mutated,
        input_fingerprints=prints,
    )
    _torch_save({"outputs": outputs}, "outputs.pt")


# ---- timing (CUDA) ---------------------------------------------------------------------
def timing_plan(first_ms: float, warmup: int, repetitions: int, budget_s: float) -> tuple[int, int]:
    """(warm-up calls, timed calls) for a call that took ``first_ms`` once warm.

    Up to ``warmup`` and ``repetitions`` calls, but no more than fit in about ``budget_s`` of
    device time, and never fewer than 2 warm-up and 10 timed calls: a baseline of seconds per
    call (an eager LayerNorm over one 983M-element row) would otherwise take minutes.
    """
    fit = int(budget_s * 1e3 / max(first_ms, 1e-3))
    return max(2, min(warmup, fit // 10)), max(10, min(repetitions, fit))


def _time_calls(
    fn: Callable[[list], object], input_sets: list[list], job: dict, device: torch.device
) -> dict:
    """Median/p20/p80 of device-event times, L2 flushed before each call, inputs rotating.

    Each call also gets a host wall time around a device-wide synchronize, which sees work on
    any stream; when it is far above the event time, work escaped the timed stream and the wall
    time is what counts. The number of calls follows ``timing_plan``.
    """
    flush = torch.empty(job["l2_flush_mb"] * 2**20 // 4, dtype=torch.int32, device=device)
    n = len(input_sets)
    with torch.no_grad():
        fn(input_sets[0])  # compiles, autotunes
        torch.cuda.synchronize()
        t0 = _perf_counter()
        fn(input_sets[1 % n])
        torch.cuda.synchronize()
        first_ms = (_perf_counter() - t0) * 1e3
        warmup, repetitions = timing_plan(
            first_ms, job["warmup"], job["repetitions"], job.get("timing_budget_s", 30.0)
        )
        for i in range(warmup):
            fn(input_sets[i % n])
        torch.cuda.synchronize()
        events, walls = [], []
        for i in range(repetitions):
            flush.zero_()
            torch.cuda.synchronize()
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            t0 = _perf_counter()
            start.record()
            fn(input_sets[i % n])
            end.record()
            torch.cuda.synchronize()
            walls.append((_perf_counter() - t0) * 1e3)
            events.append((start, end))
    times = sorted(s.elapsed_time(e) for s, e in events)
    walls.sort()
    q = statistics.quantiles(times, n=10)
    event_median, wall_median = statistics.median(times), statistics.median(walls)
    escaped = wall_median > 2 * event_median + 0.1
    median = wall_median if escaped else event_median
    wq = statistics.quantiles(walls, n=10)
    return {
        "median_ms": median,
        "p20_ms": wq[1] if escaped else q[1],
        "p80_ms": wq[7] if escaped else q[7],
        "event_median_ms": event_median,
        "wall_median_ms": wall_median,
        "escaped_stream": escaped,
        "total_event_ms": sum(times),
        "repetitions": repetitions,
    }


def _timing_inputs(job: dict, device: torch.device, report: dict) -> list[list]:
    make = _input_maker(job, device)
    sets = [make(seed) for seed in job["input_seeds"]]
    report["input_fingerprints"] = [fingerprint(s) for s in sets]
    return sets


def _run_candidate_timing(job: dict, job_dir: str, report: dict) -> None:
    device = _setup(job)
    monitor = Monitor(tuple(job["hybrid_allow"]), check_tf32=False)
    monitor.install()
    input_sets = _timing_inputs(job, device, report)
    module = _load_source("candidate.py", "candidate")
    model = _build(module, "ModelNew", job, device)
    threads_before = set(threading.enumerate())
    report["candidate"] = _time_calls(lambda xs: model(*xs), input_sets, job, device)
    if _new_threads(threads_before):
        raise _Failure("rejected", "forward left background threads running while timed")
    # Re-verify after timing: fresh copies of every input set, compared by the judge.
    outputs = []
    with torch.no_grad():
        for xs in input_sets:
            out = model(*[x.clone() if _isinstance(x, _Tensor) else x for x in xs])
            _sync(device)
            outputs.append(_host_copy(_plain_outputs(out, xs, device)))
    _torch_save({"outputs": outputs}, "outputs.pt")


def _run_reference_timing(job: dict, job_dir: str, report: dict) -> None:
    device = _setup(job)
    input_sets = _timing_inputs(job, device, report)
    module = _load_source("reference.py", "reference")
    model = _build(module, "Model", job, device)
    report["eager"] = _time_calls(lambda xs: model(*xs), input_sets, job, device)
    if job.get("time_compile"):
        try:
            compiled = compile_baseline(model, input_sets[0])
            report["compile"] = _time_calls(lambda xs: compiled(*xs), input_sets, job, device)
        except Exception as exc:  # a baseline that cannot compile is recorded, not fatal
            report["compile_error"] = f"{_type(exc).__name__}: {exc}"[:500]


def compile_baseline(model: torch.nn.Module, inputs: list, backend: str = "inductor"):
    """``torch.compile(model)`` in a sandbox child, checked to have captured a graph.

    The sandbox sets TORCHDYNAMO_DISABLE=1 so that torch.compile in a candidate runs eagerly;
    torch reads that variable at every ``torch.compile`` call (``config.disable = False`` does not
    override it), so it is removed here, in a reference-only job. Until this was found, the
    "torch.compile" baseline silently timed eager PyTorch.
    """
    import torch._dynamo
    from torch._dynamo.utils import counters

    os.environ.pop("TORCHDYNAMO_DISABLE", None)
    torch._dynamo.config.disable = False
    before = counters["stats"]["unique_graphs"]
    compiled = torch.compile(model, backend=backend)
    with torch.no_grad():
        compiled(*inputs)
    if counters["stats"]["unique_graphs"] <= before:
        raise RuntimeError("torch.compile captured no graph: the baseline would be eager")
    return compiled
