"""The judge's handle on one fork server: start it, run a job with a timeout, restart on trouble.

One ``Sandbox`` is one worker slot (one per GPU on CUDA). It enforces the wall-clock timeout
(killing the child's process group), watches the child's RSS on CUDA (where an address-space
limit cannot be used), and restarts the fork server if anything kills it.
"""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

# Environment variables a sandboxed process keeps (everything else is dropped: tokens, paths).
_KEEP_PREFIXES = ("CUDA", "NVIDIA", "TRITON_PTXAS", "TRITON_CUOBJDUMP", "TRITON_NVDISASM")
_KEEP_NAMES = ("PATH", "LANG", "LC_ALL", "LD_LIBRARY_PATH", "TZ")
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


def clean_environment(device: str, cuda_index: int | None, scratch: str) -> dict[str, str]:
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
    ) -> None:
        self.device = device
        self.scratch = scratch
        self.cuda_index = cuda_index
        self.memory_limit_bytes = memory_limit_bytes
        self.output_cap = output_cap
        self.start_timeout_s = start_timeout_s
        self._proc: subprocess.Popen | None = None
        self._buffer = b""

    # ---- server lifecycle ---------------------------------------------------------------
    def start(self) -> None:
        os.makedirs(self.scratch, exist_ok=True)
        bootstrap = (
            f"import sys; sys.path.insert(0, {_PACKAGE_ROOT!r}); "
            "from drtriton.judge.server import main; main()"
        )
        self._proc = subprocess.Popen(
            [sys.executable, "-c", bootstrap],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            cwd=self.scratch,
            env=clean_environment(self.device, self.cuda_index, self.scratch),
        )
        self._buffer = b""
        event = self._read_event(time.monotonic() + self.start_timeout_s)
        if event is None or event.get("event") != "ready":
            self.close()
            raise RuntimeError("judge fork server failed to start")

    def close(self) -> None:
        if self._proc is None:
            return
        try:
            self._proc.kill()
            self._proc.wait(timeout=10)
        except (ProcessLookupError, subprocess.TimeoutExpired):
            pass
        for stream in (self._proc.stdin, self._proc.stdout):
            if stream:
                stream.close()
        self._proc = None

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
            "memory_limit_bytes": self.memory_limit_bytes if self.device == "cpu" else 0,
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
        pid = started["pid"]
        deadline = t0 + timeout_s
        timed_out = memory_killed = False
        while True:
            event = self._read_event(min(deadline, time.monotonic() + 0.2))
            if event is not None:
                break
            if not self._alive():
                return self._lost(t0)
            if time.monotonic() >= deadline:
                timed_out = True
            elif self.device != "cpu" and _rss_bytes(pid) > self.memory_limit_bytes:
                memory_killed = True
            if timed_out or memory_killed:
                _kill_group(pid)
                event = self._read_event(time.monotonic() + 30)
                if event is None:
                    self.close()
                    return self._lost(t0, timed_out=timed_out)
                break
        return JobResult(
            exit_code=event.get("code"),
            signal=event.get("signal"),
            timed_out=timed_out,
            memory_killed=memory_killed,
            output=event.get("output", ""),
            wall_s=time.monotonic() - t0,
        )

    def _lost(self, t0: float, timed_out: bool = False) -> JobResult:
        # The candidate took the server down with it (e.g. killed its parent): restart later.
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


def _rss_bytes(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def _kill_group(pid: int) -> None:
    for target in (lambda: os.killpg(pid, signal.SIGKILL), lambda: os.kill(pid, signal.SIGKILL)):
        try:
            target()
        except (ProcessLookupError, PermissionError):
            pass
