"""What runs inside one sandboxed child process: a reference run, a candidate's trials, or timing.

The judge writes a job directory (``job.json`` with the seeds, the reference, the program source);
the fork server (``server.py``) forks a child that calls ``sealed_run_job()(job_dir)`` there. The
child remakes the inputs from the seeds with the reference's ``get_inputs`` on its device, sends
its outputs (raw bytes, laid out as the report says) as one descriptor over the job's socket
(``channel.py``: a memfd on the CPU, GPU memory on CUDA) and writes ``report.txt`` (a Python
literal), which the judge reads after the child exited. The reference's outputs never enter a
candidate process: comparison happens in the judge.

Sealing (candidate jobs): this module is executed afresh in the child, with a private copy of
``builtins`` and outside ``sys.modules``, and every library callable it uses once the candidate
may run is bound below, at that execution, as a C-level function or method. Then ``seal.scrub``
guards the C entry points of the op record and ``seal.install_audit_hook`` blocks the ways to the
worker's frames, ``gc`` walks and the result files. The authoritative record of aten ops in
``forward`` is torch's C++ profiler (RecordFunction), which sees ops whatever Python modes,
dispatch keys or patched classes say; a range named with a per-job random nonce proves the
record was not restarted. The Python monitor (``monitor.py``) adds launch counts and host
escapes (``Tensor.numpy``/``item``) as defence in depth.
"""

from __future__ import annotations

import _socket
import builtins
import json
import os
import secrets
import statistics
import struct
import sys
import threading
import time
import types
from collections.abc import Callable

import torch

from drtriton import gpu_gate
from drtriton.judge import seal
from drtriton.judge.autotune import untimed_autotuning
from drtriton.judge.channel import OUTPUTS_SOCKET
from drtriton.judge.monitor import ALLOWED_OPS, CASTING_OPS, Monitor
from drtriton.program import ProgramError, as_output_tuple, importable, make_inputs

REPORT = "report.txt"
OUTPUT_ALIGN = 64  # bytes: every output starts at a multiple (so the judge can view any dtype)
ACK_TIMEOUT_S = 120.0  # how long a child waits for the judge to take its outputs
PHASE_MARK = "[drtriton-phase] "  # the last such line of a child's output names where it was

# ---- bound now, before any candidate code can run --------------------------------------------
_TB = torch._C.TensorBase
_Tensor = torch.Tensor
_t_device = _TB.device.__get__
_t_dtype = _TB.dtype.__get__
_t_shape = _TB.shape.__get__
_t_numel = _TB.numel
_t_detach = _TB.detach
_t_to = _TB.to
_t_contiguous = _TB.contiguous
_t_numpy = _TB.numpy
_t_reshape = _TB.reshape
_t_view = _TB.view
_t_sum = _TB.sum
_t_item = _TB.item
_t_clone = _TB.clone
_t_copy = _TB.copy_
_t_zero = _TB.zero_
_t_storage = _TB.untyped_storage
_s_ptr = torch._C.StorageBase.data_ptr
_s_nbytes = torch._C.StorageBase.nbytes
_t_equal = torch.equal
_set_grad = torch._C._set_grad_enabled
_len_function_modes = torch._C._len_torch_function_stack
_len_dispatch_modes = torch._C._len_torch_dispatch_stack
_rf_enter = torch._C._autograd._record_function_with_args_enter
_rf_exit = torch._C._autograd._record_function_with_args_exit
_ev_name = torch._C._autograd._KinetoEvent.name
_ev_dtypes = torch._C._autograd._KinetoEvent.dtypes
_ev_start = torch._C._autograd._KinetoEvent.start_ns
_ev_end = torch._C._autograd._KinetoEvent.end_ns
_ev_thread = torch._C._autograd._KinetoEvent.start_thread_id
_result_events = torch._C._autograd._ProfilerResult.events
_ProfilerConfig = torch._C._profiler.ProfilerConfig
_ProfilerState = torch._C._profiler.ProfilerState
_ProfilerActivity = torch._C._profiler.ProfilerActivity
_ExperimentalConfig = torch._C._profiler._ExperimentalConfig
_cuda_sync = getattr(torch._C, "_cuda_synchronize", None)
_cuda_event = torch.cuda.Event
_thread_count = getattr(__import__("_thread"), "_count", lambda: threading.active_count())
_perf_counter = time.perf_counter
_os_open, _os_write, _os_close, _os_ftruncate = os.open, os.write, os.close, os.ftruncate
_os_lseek, _os_pwrite = os.lseek, os.pwrite
_memfd_create = getattr(os, "memfd_create", None)
_sock_new = _socket.socket
_sock_connect, _sock_sendmsg = _socket.socket.connect, _socket.socket.sendmsg
_sock_recv, _sock_close = _socket.socket.recv, _socket.socket.close
_sock_settimeout = _socket.socket.settimeout
_AF_UNIX, _SOCK_STREAM = _socket.AF_UNIX, _socket.SOCK_STREAM
_SOL_SOCKET, _SCM_RIGHTS = _socket.SOL_SOCKET, _socket.SCM_RIGHTS
_pack = struct.pack
_memoryview = memoryview
_type, _isinstance, _repr, _len, _str = type, isinstance, repr, len, str
_float64 = torch.float64
_uint8 = torch.uint8
_CUDA = torch.device("cuda")  # a child sees its one GPU as cuda:0
_quantiles, _median = statistics.quantiles, statistics.median
_INF = float("inf")


def sealed_run_job() -> Callable[[str], int]:
    """``run_job`` from a fresh execution of this module: private builtins, not in sys.modules.

    A candidate that patches ``builtins``, this module's globals (found through sys.modules) or
    torch's Python classes after this point changes none of the objects the returned function
    uses.
    """
    with open(__file__) as f:
        source = f.read()
    namespace = {
        "__builtins__": dict(builtins.__dict__),
        "__name__": "_drtriton_sealed_worker",
        "__file__": __file__,
    }
    exec(compile(source, __file__, "exec"), namespace)
    return namespace["run_job"]


def forget_project_modules() -> None:
    """Drop drtriton's modules from sys.modules (a candidate importing them gets fresh copies)."""
    for name in [n for n in sys.modules if n == "drtriton" or n.startswith("drtriton.")]:
        del sys.modules[name]


def run_job(job_dir: str) -> int:
    """Entry point in the child. Returns the exit code (the report says what happened)."""
    with open(os.path.join(job_dir, "job.json")) as f:
        job = json.load(f)
    out = _Results(job_dir, job)
    report: dict = {"kind": job["kind"], "status": "ok", "reason": ""}
    if job.get("gpu_gate") and job["kind"] in ("reference_timing", "call"):  # no candidate code
        os.environ[gpu_gate.GATE_ENV] = os.path.abspath(job_dir)
    try:
        kind = job["kind"]
        if kind == "reference":
            _run_reference(job, report, out)
        elif kind == "candidate":
            _run_candidate(job, report, out)
        elif kind == "candidate_timing":
            _run_candidate_timing(job, report, out)
        elif kind == "reference_timing":
            _run_reference_timing(job, report)
        elif kind == "call":
            _run_call(job, report)
        elif kind == "kernel_compile":
            _run_kernel_compile(report)
        else:
            raise ValueError(f"unknown job kind {kind}")
    except _Failure as failure:
        report.update(status=failure.status, reason=failure.reason)
    except SystemExit as exc:
        report.update(status="crashed", reason=f"candidate called sys.exit({exc.code!r})")
    except BaseException as exc:  # any other failure of candidate code is a runtime error
        report.update(_classify_exception(exc, report.get("phase", "forward")))
    _phase(report, "write results")
    out.finish(report)
    return 0


class _Failure(Exception):
    def __init__(self, status: str, reason: str) -> None:
        super().__init__(reason)
        self.status = status
        self.reason = reason


def _classify_exception(exc: BaseException, phase: str) -> dict:
    text = f"{_type(exc).__name__}: {exc}"
    if _isinstance(exc, seal.SealViolation):
        return {"status": "rejected", "reason": f"{phase}: {text[:300]}"}
    if _isinstance(exc, MemoryError) or "can't allocate memory" in text or "out of memory" in text:
        return {"status": "crashed", "reason": f"memory limit exceeded in {phase}: {text[:300]}"}
    if "CompilationError" in _type(exc).__name__:
        return {"status": "compile_error", "reason": f"Triton compilation in {phase}: {text[:500]}"}
    return {"status": "runtime_error", "reason": f"{phase}: {text[:500]}"}


def _phase(report: dict, name: str) -> None:
    """Note where the job is: in the report (with the seconds each phase took, trials summed)
    and on stdout, for a job killed at its deadline."""
    now = _perf_counter()
    seconds = report.setdefault("phase_s", {})
    if "phase" in report:
        last = report["phase"].split(" (")[0]
        seconds[last] = round(seconds.get(last, 0.0) + now - report["phase_started"], 3)
    report["phase"], report["phase_started"] = name, now
    print(PHASE_MARK + name, flush=True)


class _Results:
    """The child's report file, opened before any candidate code runs, and its outputs.

    The audit hook blocks every file operation on the report's path (and the job's socket)
    afterwards, so only this descriptor can write it. Outputs are kept as copies (on the child's
    device) and sent by ``finish``, after the last call into candidate code; then the report is
    written from offset 0 (a candidate that wrote through the descriptor before is overwritten;
    threads it left running are a rejection).
    """

    def __init__(self, job_dir: str, job: dict) -> None:
        self.paths = [os.path.join(job_dir, REPORT), os.path.join(job_dir, OUTPUTS_SOCKET)]
        self.fds = [_os_open(self.paths[0], os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)]
        self.nonce = job.get("outputs_nonce", "")
        self.cuda = job.get("device", "cpu").startswith("cuda")
        self.allowed_calls: frozenset[int] = frozenset()
        if self.cuda:
            from drtriton.judge import cuda_share

            self.exported = cuda_share.Exported
            self.allowed_calls = cuda_share.driver().addresses()
        self.parts: list = []
        self.specs: list[list] = []
        self.size = 0

    def add_outputs(self, tensors: list) -> list[int]:
        """Keep copies of ``tensors``; return their indices in ``report["outputs"]``."""
        indices = []
        for t in tensors:
            flat = _t_reshape(_t_clone(_t_contiguous(_t_detach(t))), (-1,))
            if not self.cuda and _t_device(flat).type != "cpu":
                flat = _t_to(flat, "cpu")
            data = _t_view(flat, _uint8)
            offset = -(-self.size // OUTPUT_ALIGN) * OUTPUT_ALIGN
            nbytes = _t_numel(data)
            self.specs.append([_str(_t_dtype(t)), list(_t_shape(t)), offset, nbytes])
            self.parts.append((data, offset))
            self.size = offset + nbytes
            indices.append(_len(self.specs) - 1)
        return indices

    def _descriptor(self) -> tuple[int, int, object]:
        """(fd, allocation size, what keeps it alive) holding every output at its offset."""
        if self.cuda:
            exported = self.exported(self.parts, self.size, _CUDA)
            return exported.fd, exported.size, exported
        fd = _memfd_create("drtriton-outputs")
        _os_ftruncate(fd, self.size)
        for data, offset in self.parts:
            view = _memoryview(_t_numpy(data))
            while view:
                written = _os_pwrite(fd, view[: 1 << 30], offset)
                view, offset = view[written:], offset + written
        return fd, self.size, None

    def send_outputs(self) -> None:
        """Hand the outputs to the judge over the job's socket; wait until it has them."""
        fd, size, keep = self._descriptor()
        header = f'{{"nonce": "{self.nonce}", "nbytes": {self.size}, "size": {size}}}'.encode()
        sock = _sock_new(_AF_UNIX, _SOCK_STREAM)
        try:
            _sock_settimeout(sock, ACK_TIMEOUT_S)
            _sock_connect(sock, self.paths[1])
            _sock_sendmsg(sock, [_pack(">I", _len(header)) + header],
                          [(_SOL_SOCKET, _SCM_RIGHTS, _pack("i", fd))])
            _sock_recv(sock, 1)
        finally:
            _sock_close(sock)
            _os_close(fd)
            del keep

    def finish(self, report: dict) -> None:
        report["outputs"] = self.specs
        if self.parts and report.get("status") == "ok":
            try:
                self.send_outputs()
            except Exception as exc:  # an allocation out of memory too: the report says why
                report["outputs_error"] = f"{_type(exc).__name__}: {exc}"[:300]
            self.parts = []
        fd = self.fds[0]
        _os_ftruncate(fd, 0)
        _os_lseek(fd, 0, 0)
        view = _memoryview(_repr(_literal(report)).encode())
        while view:
            view = view[_os_write(fd, view[: 1 << 30]) :]
        _os_close(fd)


def _literal(value):
    """``value`` with non-finite floats as text, so that its repr parses as a Python literal."""
    if _type(value) is float and not (-_INF < value < _INF):
        return _repr(value)
    if _type(value) is dict:
        return {k: _literal(v) for k, v in value.items()}
    if _type(value) in (list, tuple):
        return [_literal(v) for v in value]
    return value


def _bits(t: torch.Tensor) -> torch.Tensor:
    """``t``'s bytes as a flat uint8 tensor on its own device (compared exactly, NaNs too)."""
    return _t_view(_t_reshape(_t_contiguous(_t_detach(t)), (-1,)), _uint8)


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


def _load_source(path: str, name: str, phase: str) -> types.ModuleType:
    with open(path) as f:
        source = f.read()
    module = types.ModuleType(name)
    module.__file__ = path
    module.__builtins__ = builtins  # the shared builtins, never this worker's private copy
    try:
        with importable(module):
            exec(compile(source, path, "exec"), module.__dict__)
    except SystemExit:
        raise
    except BaseException as exc:
        if _isinstance(exc, seal.SealViolation):
            raise _Failure("rejected", f"{phase}: {exc}") from exc
        raise _Failure("compile_error", f"{phase}: {_type(exc).__name__}: {exc}") from exc
    return module


def _init_args(reference: types.ModuleType, job: dict, report: dict) -> list:
    _phase(report, "reference get_init_inputs")
    torch.manual_seed(job["model_seed"])
    return list(reference.get_init_inputs())


def _build(module: types.ModuleType, cls_name: str, init: list, job: dict, device, report):
    _phase(report, f"{cls_name}.__init__")
    cls = getattr(module, cls_name, None)
    if cls is None:
        raise _Failure("compile_error", f"program defines no {cls_name}")
    torch.manual_seed(job["model_seed"])  # same seed as the reference: parameters match
    try:
        return cls(*init).to(device)
    except SystemExit:
        raise
    except BaseException as exc:
        raise _Failure(**_classify_exception(exc, f"{cls_name}.__init__")) from exc


def _sync(device: torch.device) -> None:
    if device.type == "cuda" and _cuda_sync is not None:
        _cuda_sync()


def fingerprint(values: list) -> list:
    """A cheap summary of inputs (float64 sum, shape, dtype per tensor) to check reproduction.

    JSON-safe and comparable with ``==`` (the sum is kept as text, so NaN equals NaN).
    """
    out: list = []
    for x in values:
        if _type(x) is _Tensor or _isinstance(x, _Tensor):
            total = _t_item(_t_sum(x, dtype=_float64)) if _t_numel(x) else 0.0
            out.append([_repr(total), list(_t_shape(x)), _str(_t_dtype(x))])
        else:
            out.append(_repr(x))
    return out


# ---- output checks ---------------------------------------------------------------------
def _plain_outputs(out: object, inputs: list, device: torch.device) -> list[torch.Tensor]:
    """The forward result as plain tensors, or a rejection saying why not."""
    items = [out] if _type(out) is _Tensor else out
    if _type(items) not in (tuple, list) or not items:
        raise _Failure("rejected", f"forward returned {_type(out).__name__}, not tensors")
    for t in items:
        if _type(t) is not _Tensor:
            raise _Failure(
                "rejected", f"forward returned a {_type(t).__name__}, not a plain Tensor"
            )
        if _t_device(t).type != device.type:
            raise _Failure("incorrect", f"output on {_t_device(t)}, expected {device.type}")
    spans = [_span(x) for x in inputs if _type(x) is _Tensor and _t_numel(x)]
    for t in items:
        if _t_numel(t) and any(_overlaps(_span(t), s) for s in spans):
            raise _Failure("rejected", "an output aliases an input")
    return list(items)


def _span(t: torch.Tensor) -> tuple[int, int]:
    storage = _t_storage(t)
    return _s_ptr(storage), _s_ptr(storage) + _s_nbytes(storage)


def _overlaps(a: tuple[int, int], b: tuple[int, int]) -> bool:
    return a[0] < b[1] and b[0] < a[1]


def _same_layout(a: list, b: list) -> bool:
    if _len(a) != _len(b):
        return False
    for x, y in zip(a, b, strict=True):
        if (_type(x) is _Tensor) != (_type(y) is _Tensor):
            return False
        if _type(x) is _Tensor and (_t_shape(x) != _t_shape(y) or _t_dtype(x) != _t_dtype(y)):
            return False
    return True


def _unchanged(before: list, after: list) -> bool:
    """Inputs after forward are bit for bit the pristine ones, compared on their device (host
    copies of a 1.6 GB input cost about 5 s per trial on an H200). ``torch.equal`` was bound at
    import, and the seal refuses new aten kernels (``torch.library``)."""
    for b, a in zip(before, after, strict=True):
        if _type(b) is _Tensor:
            if _type(a) is not _Tensor or _t_shape(a) != _t_shape(b) or _t_dtype(a) != _t_dtype(b):
                return False
            if not _t_equal(_bits(a), _bits(b)):
                return False
    return True


def _modes_clean() -> bool:
    """No torch function or dispatch mode left on the stacks (a mode could rewrite our ops)."""
    return _len_function_modes() == 0 and _len_dispatch_modes() == 0


# ---- the C++ op record ---------------------------------------------------------------------
class _OpRecord:
    """Aten ops seen by torch's C++ profiler between ``start`` and ``stop`` (forward calls).

    Holds the profiler's control functions taken out of torch by ``seal.scrub``; its instance
    lives only in the worker's frames. A range named with a per-job nonce opens each window, so
    a record restarted by the candidate lacks it.
    """

    def __init__(self, controls: dict, hybrid_allow: frozenset) -> None:
        self._prepare = controls["_prepare_profiler"]
        self._enable = controls["_enable_profiler"]
        self._disable = controls["_disable_profiler"]
        self._marker = "drtriton-forward-" + secrets.token_hex(16)
        self._config = _ProfilerConfig(
            _ProfilerState.KINETO, True, False, False, False, False, _ExperimentalConfig()
        )
        self._activities = {_ProfilerActivity.CPU}
        self.allowed = ALLOWED_OPS | hybrid_allow
        self.hybrid_allow = hybrid_allow
        self.forbidden: dict[str, int] = {}
        self.problems: list[str] = []
        self._handle = None

    def start(self) -> None:
        self._prepare(self._config, self._activities)  # before every enable (torch crashed on a
        self._enable(self._config, self._activities)  # second session prepared only once)
        self._handle = _rf_enter(self._marker)

    def stop(self) -> None:
        _rf_exit(self._handle)
        try:
            result = self._disable()
        except Exception as exc:  # stopped behind our back
            self.problems.append(f"the op record was stopped during forward ({exc})")
            return
        events = _result_events(result)
        if not any(_ev_name(e) == self._marker for e in events):
            self.problems.append("the op record was restarted during forward")
        for op, parents in _aten_ops(events):
            verdict = self._judge(op, parents)
            if verdict:
                self.forbidden[verdict] = self.forbidden.get(verdict, 0) + 1

    def _judge(self, op: tuple, parents: list) -> str | None:
        """The forbidden name an op counts as, or None.

        Ops inside a hybrid-allowed op (a convolution's cuDNN call) are its implementation.
        Anywhere else an op is judged by itself, nested or not: allowed ops are built of allowed
        ops (``to`` -> ``_to_copy`` -> ``copy_``), so compute nested in one (a dispatch mode of
        the candidate's that answers ``empty`` with a ``relu``) still shows; a ``copy_`` that
        changes the dtype is reduced precision whatever op asked for it.
        """
        name, dtypes = op
        if any(p in self.hybrid_allow for p in parents):
            return None
        if name == "copy_" and _len(dtypes) >= 2 and dtypes[0] != dtypes[1]:
            return "copy_(dtype change)"
        if name in self.allowed or name in CASTING_OPS:
            return None
        return name


def _aten_ops(events: list) -> list[tuple[tuple, list]]:
    """((name, dtypes), names of the enclosing aten ops) per aten event: an op is inside another
    when its span on the same thread lies within the other's."""
    spans = []
    for e in events:
        name = _ev_name(e)
        if name.startswith("aten::"):
            spans.append((_ev_thread(e), _ev_start(e), -_ev_end(e), name[6:], _ev_dtypes(e)))
    spans.sort()
    out, stack = [], []
    for thread, start, neg_end, name, dtypes in spans:
        while stack and (stack[-1][0] != thread or stack[-1][1] < start):
            stack.pop()
        out.append(((name, dtypes), [s[2] for s in stack]))
        stack.append((thread, -neg_end, name))
    return out


def _run_time_report(monitor: Monitor, record: _OpRecord, blocked: Callable[[], list]) -> dict:
    """The run-time checks' findings: the C++ op record's forbidden ops merged with the Python
    monitor's, and every tampering any layer saw."""
    python = monitor.report()
    ops = {k: max(record.forbidden.get(k, 0), python["forbidden_ops"].get(k, 0))
           for k in {**record.forbidden, **python["forbidden_ops"]}}
    return {**python, "forbidden_ops": ops,
            "tampered": list(monitor.tampered) + record.problems + blocked()}


def _sealed_model(job: dict, report: dict, out: _Results, init: list, device):
    """Install the Python monitor and the seal, then import the candidate and build ModelNew:
    (monitor, op record, the audit hook's findings, model)."""
    _phase(report, "seal")
    monitor = Monitor(tuple(job["hybrid_allow"]))
    monitor.install()  # before the candidate exists
    record, blocked = _seal(job, out)
    _phase(report, "candidate import")
    module = _load_source("candidate.py", "candidate", "candidate import")
    return monitor, record, blocked, _build(module, "ModelNew", init, job, device, report)


def _seal(job: dict, out: _Results) -> tuple[_OpRecord, Callable[[], list]]:
    """Guard the op record's entry points, then install the audit hook (in that order).

    ``job.json`` is protected like the result files: it holds the input seeds, and a candidate
    that read them could make the trials' inputs at import and answer them with PyTorch there,
    outside every forward.
    """
    forget_project_modules()
    controls = seal.scrub()
    record = _OpRecord(controls, frozenset(job["hybrid_allow"]))
    protected = [*out.paths, os.path.join(os.path.dirname(out.paths[0]), "job.json")]
    blocked = seal.install_audit_hook(protected, out.fds, out.allowed_calls)
    return record, blocked


# ---- a trusted function over an untrusted reference --------------------------------------
def _run_call(job: dict, report: dict) -> None:
    """``module:function(reference_source, **arguments)`` of the project's own code, for work
    that executes a user's reference (the compiler's capture): its result goes to the report."""
    import importlib

    module_name, _, function_name = job["function"].partition(":")
    if not module_name.startswith("drtriton."):
        raise _Failure("rejected", f"not a drtriton function: {job['function']}")
    _setup(job)
    with open("reference.py") as f:
        source = f.read()
    _phase(report, job.get("phase", job["function"]))
    function = getattr(importlib.import_module(module_name), function_name)
    result = function(source, **job.get("arguments", {}))
    if not isinstance(result, dict):
        raise _Failure("runtime_error", f"{job['function']} returned {type(result).__name__}")
    report["result"] = result


def _run_kernel_compile(report: dict) -> None:
    """Compile one kernel request for the judge's store (``kernel_store``); runs no candidate."""
    from drtriton.judge import kernel_store

    with open("request.json") as f:
        request = json.load(f)
    _phase(report, "kernel compile")
    report["result"] = kernel_store.compile_request(request, "entry")


def _use_kernel_store(job: dict, report: dict) -> None:
    """Load stored kernels instead of compiling them; note the rest for the judge. The counts
    land in the report (a candidate can change them: they are information, not evidence)."""
    if job.get("kernel_store") is None:
        return
    from drtriton.judge import kernel_store

    report["kernel_store"] = kernel_store.install_child_hook(
        job["kernel_store"], kernel_store.REQUESTS_FILE
    )


# ---- reference -------------------------------------------------------------------------
def _run_reference(job: dict, report: dict, out: _Results) -> None:
    """The reference alone, on the judge's seeds: its outputs and its inputs' fingerprints, and
    (``job["oracle"]``) the residuals of a float64 run on the same inputs and weights."""
    device = _setup(job)
    _phase(report, "reference import")
    reference = _load_source("reference.py", "reference", "reference import")
    init = _init_args(reference, job, report)
    model = _build(reference, "Model", init, job, device, report)
    prints, trials, oracles, spreads = [], [], [], []
    oracle = bool(job.get("oracle"))
    _set_grad(False)
    for k, seed in enumerate(job["input_seeds"]):
        _phase(report, f"reference get_inputs (trial {k})")
        xs = make_inputs(reference, seed, device)
        prints.append(fingerprint(xs))
        exact = nudged = None
        if oracle:
            _phase(report, f"reference float64 oracle (trial {k})")
            exact = _float64_outputs(model, xs, report)
            oracle = exact is not None
            nudged = _nudged_outputs(model, xs, seed) if oracle else None
        _phase(report, f"reference forward (trial {k})")
        try:
            items = as_output_tuple(model(*xs))
        except ProgramError as exc:
            raise _Failure("invalid_reference", str(exc)) from exc
        trials.append(out.add_outputs(list(items)))
        if oracle:
            oracles.append(_residual_outputs(items, exact, out))
            spreads.append(_spreads(items, nudged, exact) if nudged is not None
                           else [None] * _len(items))
        del xs, items, exact, nudged
    report.update(input_fingerprints=prints, trial_outputs=trials)
    if oracle:
        report.update(oracle_residuals=oracles, oracle_spreads=spreads)


def _float64_outputs(model, xs: list, report: dict) -> tuple | None:
    """The program in float64 (a copy of the model, float inputs widened), before the fp32 run
    changes any state (batch-norm statistics); None, with the reason noted, where it cannot run
    so (an op without a float64 kernel)."""
    import copy

    try:
        wide = copy.deepcopy(model).double()
        args = [x.double() if _isinstance(x, _Tensor) and x.is_floating_point() else x for x in xs]
        return as_output_tuple(wide(*args))
    except Exception as exc:  # noqa: BLE001 - the verdict then says parity was not checked
        report["oracle_error"] = f"{_type(exc).__name__}: {exc}"[:200]
        return None


ULP = 2.0**-24  # fp32's unit roundoff


def _nudged_outputs(model, xs: list, seed: int) -> tuple | None:
    """The fp32 program with every float weight, buffer and input scaled by 1 + ULP * r (r
    uniform in [-1, 1], seeded): how far fp32 rounding alone moves its outputs. A deep or
    ill-conditioned program (batch norm over two samples, say) amplifies rounding; its
    reference's own error against the oracle can be luckily small on one seed."""
    import copy

    try:
        nudged = copy.deepcopy(model)
        gen = torch.Generator(device=xs[0].device if xs and _isinstance(xs[0], _Tensor) else "cpu")
        gen.manual_seed(seed)

        def nudge(t):
            noise = torch.rand(t.shape, generator=gen, device=t.device, dtype=t.dtype) * 2 - 1
            return t * (1 + noise * ULP)

        for t in [*nudged.parameters(), *nudged.buffers()]:
            if t.is_floating_point():
                t.data = nudge(t.data)
        args = [nudge(x) if _isinstance(x, _Tensor) and x.is_floating_point() else x for x in xs]
        return as_output_tuple(nudged(*args))
    except Exception:  # noqa: BLE001 - parity then uses the oracle error alone
        return None


def _spreads(items: tuple, nudged: tuple, exact: tuple) -> list:
    """Per output, ``|nudged - output| / |oracle|`` (relative RMS), or None."""
    found = []
    for value, moved, wide in zip(items, nudged, exact, strict=False):
        ok = all(_isinstance(t, _Tensor) and t.is_floating_point() and t.shape == value.shape
                 for t in (value, moved, wide))
        if not ok:
            found.append(None)
            continue
        norm = float(wide.double().norm())
        gap = float((moved.double() - value.double()).norm())
        found.append(gap / norm if norm else None)
    return found


def _residual_outputs(items: tuple, exact: tuple, out: _Results) -> list:
    """Per output, the index of ``oracle - output`` in the output's dtype (None for outputs that
    are not floating point or whose float64 twin differs in shape)."""
    found = []
    for value, wide in zip(items, exact, strict=False):
        if (_isinstance(value, _Tensor) and value.is_floating_point()
                and _isinstance(wide, _Tensor) and wide.shape == value.shape):
            found.append(out.add_outputs([(wide - value.double()).to(value.dtype)])[0])
        else:
            found.append(None)
    return found


# ---- candidate correctness -------------------------------------------------------------
def _run_candidate(job: dict, report: dict, out: _Results) -> None:
    device = _setup(job)
    if device.type == "cuda":
        untimed_autotuning()  # its own module: the candidate can reach these functions' globals
    _use_kernel_store(job, report)
    reference = _load_source("reference.py", "reference_inputs", "reference import")
    init = _init_args(reference, job, report)
    monitor, record, blocked, model = _sealed_model(job, report, out, init, device)
    threads_before = _thread_count()
    mutated, per_trial, prints, trials = [], [], [], []
    first: list = []
    seeds = job["input_seeds"]
    for k, seed in enumerate(seeds):
        _phase(report, f"get_inputs (trial {k})")
        trial = make_inputs(reference, seed, device)  # pristine: the candidate gets clones
        if not _modes_clean():
            raise _Failure("rejected", "a torch mode was left installed outside forward")
        prints.append(fingerprint(trial))
        xs = [_t_clone(v) if _type(v) is _Tensor else v for v in trial]
        if k == 0:
            first = xs
        elif k == _len(seeds) - 1 and _same_layout(first, xs):
            # The last trial reuses trial 0's tensors (same objects, same pointers) refilled
            # with new values: an answer cached by pointer or identity is now stale.
            for old, new in zip(first, xs, strict=True):
                if _type(old) is _Tensor:
                    _t_copy(old, new)
            pairs = zip(first, xs, strict=True)
            xs = [new if _type(new) is not _Tensor else old for old, new in pairs]
        _phase(report, f"forward (trial {k})")
        launches_before = monitor.launches
        _set_grad(False)
        record.start()
        try:
            with monitor.watch():
                result = model(*xs)
                _sync(device)
        finally:
            record.stop()
        _phase(report, f"checks (trial {k})")
        per_trial.append(monitor.launches - launches_before)
        if not _modes_clean():
            raise _Failure("rejected", "forward left a torch mode installed")
        trials.append(out.add_outputs(_plain_outputs(result, xs, device)))
        if not _unchanged(trial, xs):
            mutated.append(k)
        del trial, result
        if _thread_count() > threads_before:
            raise _Failure("rejected", "forward left background threads running")
    report.update(
        _run_time_report(monitor, record, blocked),
        launches_per_trial=per_trial,
        inputs_mutated=mutated,
        input_fingerprints=prints,
        trial_outputs=trials,
    )
    del model  # kept alive until the report was complete (its finalizers are the candidate's)


# ---- timing (CUDA) ---------------------------------------------------------------------
def timing_plan(
    first_ms: float, warmup_s: float, budget_s: float, max_calls: int
) -> tuple[int, int]:
    """(warm-up calls, timed calls) for a call that took ``first_ms`` once warm.

    As many calls as fit in ``warmup_s`` and ``budget_s`` of device time (do_bench's rule), at
    least 2 warm-up and 10 timed calls, at most ``max_calls`` timed: a 45 ms program gets 10
    timed calls instead of 100, a 10 us one 100.
    """
    first_ms = max(first_ms, 1e-3)
    warmup = max(2, min(max_calls, int(warmup_s * 1e3 / first_ms)))
    return warmup, max(10, min(max_calls, int(budget_s * 1e3 / first_ms)))


def _time_calls(
    fn: Callable[[list], object],
    input_sets: list[list],
    job: dict,
    device: torch.device,
    record: _OpRecord | None = None,
) -> dict:
    """Median/p20/p80 of device-event times, L2 flushed before each call, inputs rotating.

    Each call also gets a host wall time around a device-wide synchronize, which sees work on
    any stream; when it is far above the event time, work escaped the timed stream (or the
    events were forged) and the wall time is what counts. ``record`` (candidates) watches the
    untimed calls, whose number gets a random extra so that a program cannot tell which call is
    the first timed one; the timed calls run unwatched, as the baselines do.
    """
    flush = torch.empty(job["l2_flush_mb"] * 2**20 // 4, dtype=torch.int32, device=device)
    n = _len(input_sets)
    _set_grad(False)
    if record is not None:
        record.start()
    fn(input_sets[0])  # compiles, autotunes
    _cuda_sync()
    t0 = _perf_counter()
    fn(input_sets[1 % n])
    _cuda_sync()
    first_ms = (_perf_counter() - t0) * 1e3
    warmup, repetitions = timing_plan(
        first_ms, job["warmup_s"], job["timing_budget_s"], job["max_timed_calls"]
    )
    extra = secrets.randbelow(4) if record is not None else 0
    for i in range(warmup + extra):
        fn(input_sets[i % n])
    _cuda_sync()
    if record is not None:
        record.stop()
    events, walls = [], []
    for i in range(repetitions):
        _t_zero(flush)
        _cuda_sync()
        start, end = _cuda_event(enable_timing=True), _cuda_event(enable_timing=True)
        t0 = _perf_counter()
        start.record()
        fn(input_sets[i % n])
        end.record()
        _cuda_sync()
        walls.append((_perf_counter() - t0) * 1e3)
        events.append((start, end))
    times = sorted(s.elapsed_time(e) for s, e in events)
    walls.sort()
    q, wq = _quantiles(times, n=10), _quantiles(walls, n=10)
    event_median, wall_median = _median(times), _median(walls)
    escaped = wall_median > 2 * event_median + 0.1
    return {
        "median_ms": wall_median if escaped else event_median,
        "p20_ms": wq[1] if escaped else q[1],
        "p80_ms": wq[7] if escaped else q[7],
        "event_median_ms": event_median,
        "wall_median_ms": wall_median,
        "escaped_stream": escaped,
        "total_event_ms": sum(times),
        "total_wall_ms": sum(walls),
        "repetitions": repetitions,
    }


def _timing_inputs(reference, job: dict, device: torch.device, report: dict) -> list[list]:
    _phase(report, "get_inputs (timing sets)")
    sets = [make_inputs(reference, seed, device) for seed in job["input_seeds"]]
    report["input_fingerprints"] = [fingerprint(s) for s in sets]
    return sets


def _run_candidate_timing(job: dict, report: dict, out: _Results) -> None:
    device = _setup(job)
    _use_kernel_store(job, report)
    reference = _load_source("reference.py", "reference_inputs", "reference import")
    init = _init_args(reference, job, report)
    input_sets = _timing_inputs(reference, job, device, report)
    monitor, record, blocked, model = _sealed_model(job, report, out, init, device)
    threads_before = _thread_count()
    _phase(report, "timed calls")
    report["candidate"] = _time_calls(lambda xs: model(*xs), input_sets, job, device, record)
    if _thread_count() > threads_before:
        raise _Failure("rejected", "forward left background threads running while timed")
    # Re-verify after timing: fresh copies of every input set, compared by the judge.
    _phase(report, "calls after timing")
    trials = []
    _set_grad(False)
    record.start()
    try:
        for xs in input_sets:
            result = model(*[_t_clone(x) if _type(x) is _Tensor else x for x in xs])
            _sync(device)
            trials.append(out.add_outputs(_plain_outputs(result, xs, device)))
    finally:
        record.stop()
    if not _modes_clean():
        raise _Failure("rejected", "forward left a torch mode installed")
    report.update(_run_time_report(monitor, record, blocked), trial_outputs=trials)


def _run_reference_timing(job: dict, report: dict) -> None:
    """Eager and torch.compile times of the reference. Everything before the timed calls
    (inputs, the model, torch.compile's compiling) shares the GPU; the timing has it alone."""
    device = _setup(job)
    reference = _load_source("reference.py", "reference", "reference import")
    init = _init_args(reference, job, report)
    input_sets = _timing_inputs(reference, job, device, report)
    model = _build(reference, "Model", init, job, device, report)
    compiled = None
    if job.get("time_compile"):
        _phase(report, "torch.compile (compiling)")
        try:
            compiled = compile_baseline(model, input_sets[0])
        except Exception as exc:  # a baseline that cannot compile is recorded, not fatal
            report["compile_error"] = f"{_type(exc).__name__}: {exc}"[:500]
    _sync(device)
    gpu_gate.gpu_alone()
    _phase(report, "eager baseline")
    report["eager"] = _time_calls(lambda xs: model(*xs), input_sets, job, device)
    if compiled is not None:
        _phase(report, "torch.compile baseline")
        try:
            report["compile"] = _time_calls(lambda xs: compiled(*xs), input_sets, job, device)
        except Exception as exc:
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
