"""The judge's handle on one fork server: start it, run a job with a timeout, restart on trouble.

One ``Sandbox`` is one fork server, started inside a bubblewrap sandbox (``isolation.py``) unless
the caller opted out. The server enforces each job's wall-clock timeout and (on CUDA, where an
address-space limit cannot be used) its resident-memory limit; the judge keeps a backstop: a
server that does not answer within the timeout plus a grace period is killed with its whole
sandbox. A server that dies (a candidate can kill it: it is inside the sandbox) is restarted.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from drtriton.judge import isolation

# Environment variables a sandboxed process keeps (everything else is dropped: tokens, paths).
_KEEP_PREFIXES = ("CUDA", "NVIDIA", "TRITON_PTXAS", "TRITON_CUOBJDUMP", "TRITON_NVDISASM")
_KEEP_NAMES = ("PATH", "LANG", "LC_ALL", "LD_LIBRARY_PATH", "TZ", "DRTRITON_SEAL_DEBUG")
_BACKSTOP_GRACE_S = 30.0
_PACKAGE_ROOT = str(Path(__file__).resolve().parents[2])  # the directory holding drtriton/


@dataclass(frozen=True)
class JobResult:
    """How a child process ended, seen from outside it."""

    exit_code: int | None
    signal: int | None
    timed_out: bool
    memory_killed: bool
    output: str
    wall_s: float
    server_lost: bool = False
    memory_limit_gb: float = 0.0  # the limit the child ran under


def clean_environment(
    device: str, cuda_index: int | None, scratch: str, interpret: bool | None = None
) -> dict[str, str]:
    """The environment of a sandboxed server. ``interpret`` (default: on the CPU) runs Triton
    kernels in its interpreter; off on the CPU, Triton compiles for a GPU target it is given
    (the kernel store's compile children) and no GPU is visible."""
    env = {k: v for k, v in os.environ.items() if k in _KEEP_NAMES or k.startswith(_KEEP_PREFIXES)}
    env.update(
        HOME=scratch,
        TMPDIR=scratch,
        PYTHONDONTWRITEBYTECODE="1",
        PYTHONUNBUFFERED="1",
        OMP_NUM_THREADS="1",
        TORCHDYNAMO_DISABLE="1",  # torch.compile in a candidate runs eagerly, in plain sight
    )
    if device == "cpu":
        if interpret is None or interpret:
            env["TRITON_INTERPRET"] = "1"  # must be set before triton is imported
        env["CUDA_VISIBLE_DEVICES"] = ""
    elif cuda_index is not None:
        # Index into what this process sees (Ray and schedulers set CUDA_VISIBLE_DEVICES).
        visible = os.environ.get("CUDA_VISIBLE_DEVICES", "")
        ids = [v for v in visible.split(",") if v.strip()]
        env["CUDA_VISIBLE_DEVICES"] = ids[cuda_index] if cuda_index < len(ids) else str(cuda_index)
    return env


class Sandbox:
    """A warm fork server for one device; ``run`` executes one job in a fresh child."""

    def __init__(
        self,
        device: str,
        scratch: str,
        cuda_index: int | None = None,
        memory_limit_bytes: int = 8 << 30,
        output_cap: int = 64 * 1024,
        start_timeout_s: float = 180.0,
        bwrap: str | None = None,
        gpu_minor: int | None = None,
        interpret: bool | None = None,
        read_only_paths: tuple[str, ...] = (),
    ) -> None:
        self.device = device
        self.scratch = scratch
        self.cuda_index = cuda_index
        self.memory_limit_bytes = memory_limit_bytes
        self.output_cap = output_cap
        self.start_timeout_s = start_timeout_s
        self.bwrap = bwrap  # None: no OS sandbox (the caller opted out)
        self.gpu_minor = gpu_minor
        self.interpret = interpret
        self.read_only_paths = read_only_paths  # visible inside even under /tmp (kernel store)
        self._proc: subprocess.Popen | None = None
        self._init_pid: int | None = None
        self._buffer = b""

    # ---- server lifecycle ---------------------------------------------------------------
    def start(self) -> None:
        os.makedirs(self.scratch, exist_ok=True)
        bootstrap = (
            f"import sys; sys.path.insert(0, {_PACKAGE_ROOT!r}); "
            "from drtriton.judge.server import main; main()"
        )
        argv = [sys.executable, "-c", bootstrap]
        env = clean_environment(self.device, self.cuda_index, self.scratch, self.interpret)
        info_read, info_write = os.pipe() if self.bwrap else (-1, -1)
        if self.bwrap:
            code = [sys.prefix, sys.exec_prefix, sys.base_prefix, _PACKAGE_ROOT,
                    os.path.dirname(os.path.realpath(sys.executable)), *sys.path,
                    *self.read_only_paths]
            argv = isolation.command(
                self.bwrap, self.scratch, argv, self.gpu_minor, info_write, code
            )
            env["DRTRITON_PID_NAMESPACE"] = "1"
        log_path = os.path.join(self.scratch, "server-stderr.log")  # why a start failed
        with open(log_path, "wb") as log:
            self._proc = subprocess.Popen(
                argv,
                pass_fds=(info_write,) if self.bwrap else (),
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=log,
                cwd=self.scratch,
                env=env,
            )
        self._buffer = b""
        self._init_pid = None
        if self.bwrap:
            os.close(info_write)
            self._init_pid = isolation.read_init_pid(info_read)
        event = self._read_event(time.monotonic() + self.start_timeout_s)
        if event is None or event.get("event") != "ready":
            self.close()
            raise RuntimeError(f"judge fork server failed to start: {_last_line(log_path)}")

    def close(self) -> None:
        # the pool's close (an interrupt) and a job's thread may close one sandbox at once:
        # whoever takes the process first ends it
        proc, self._proc = self._proc, None
        if proc is None:
            return
        if self._init_pid:  # the sandbox's init: its death ends every process inside
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(self._init_pid, signal.SIGKILL)
            self._init_pid = None
        try:
            proc.kill()
            proc.wait(timeout=10)
        except (ProcessLookupError, subprocess.TimeoutExpired):
            pass
        for stream in (proc.stdin, proc.stdout):
            if stream:
                stream.close()

    def __enter__(self) -> Sandbox:
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _alive(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    # ---- one job --------------------------------------------------------------------------
    def run(self, job_dir: str, timeout_s: float, triton_cache_dir: str) -> JobResult:
        """Run ``worker.run_job(job_dir)`` in a fresh child; never raises for child faults."""
        if not self._alive():
            self.start()
        request = {
            "job_dir": job_dir,
            "triton_cache_dir": triton_cache_dir,
            "output_cap": self.output_cap,
            "timeout_s": timeout_s,
            "memory_limit_bytes": self.memory_limit_bytes if self.device == "cpu" else 0,
            "rss_limit_bytes": self.memory_limit_bytes if self.device != "cpu" else 0,
        }
        t0 = time.monotonic()
        try:
            self._proc.stdin.write((json.dumps(request) + "\n").encode())
            self._proc.stdin.flush()
        except (BrokenPipeError, OSError):
            return self._lost(t0)
        started = self._read_event(t0 + 60)
        if started is None or started.get("event") != "started":
            return self._lost(t0)
        # The server kills the child at its deadline; this is the backstop for a server that a
        # candidate stopped or killed.
        event = self._read_event(t0 + timeout_s + _BACKSTOP_GRACE_S)
        if event is None or event.get("event") != "exit":
            return self._lost(t0, timed_out=time.monotonic() - t0 >= timeout_s)
        return JobResult(
            exit_code=event.get("code"),
            signal=event.get("signal"),
            timed_out=bool(event.get("timed_out")),
            memory_killed=bool(event.get("memory_killed")),
            output=event.get("output", ""),
            wall_s=time.monotonic() - t0,
            memory_limit_gb=self.memory_limit_bytes / 2**30,
        )

    def _lost(self, t0: float, timed_out: bool = False) -> JobResult:
        self.close()
        return JobResult(None, None, timed_out, False, "", time.monotonic() - t0, server_lost=True)

    def _read_event(self, deadline: float) -> dict | None:
        """Next JSON line from the server, or None at the deadline or EOF."""
        fd = self._proc.stdout.fileno()
        while b"\n" not in self._buffer:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return None
            ready, _, _ = select.select([fd], [], [], remaining)
            if not ready:
                return None
            chunk = os.read(fd, 1 << 20)
            if not chunk:
                return None
            self._buffer += chunk
        line, self._buffer = self._buffer.split(b"\n", 1)
        return json.loads(line)


def _last_line(path: str) -> str:
    try:
        with open(path, "rb") as f:
            lines = [ln for ln in f.read()[-4000:].decode(errors="replace").splitlines()
                     if ln.strip() and "USDT" not in ln]
    except OSError:
        return "no output"
    return lines[-1][:300] if lines else "no output"
