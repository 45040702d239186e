"""Fork server: a warm process that forks one fresh child per job.

Started by ``sandbox.Sandbox`` with a cleaned environment (``TRITON_INTERPRET=1`` on CPU, set
before triton is imported). It imports torch and triton once, never initialises CUDA, and then
reads one JSON request per line on stdin: ``{"job_dir": ..., "memory_limit_bytes": ..., ...}``.
For each it forks a child that

* starts its own session (so the judge can kill its whole process group),
* gets stdin from /dev/null and stdout/stderr into a pipe the server drains, keeping only the
  first ``output_cap`` bytes (an output flood cannot fill a disk or block the child),
* on CPU gets ``RLIMIT_AS`` = current size + the memory limit (on CUDA the judge watches RSS
  instead, because an address-space limit breaks CUDA initialisation),
* changes into the job directory and runs a sealed copy of ``worker.run_job``
  (``worker.sealed_run_job``), then ``os._exit``.

The server enforces the job's wall-clock limit (``timeout_s``) and, on CUDA, its resident-memory
limit (``rss_limit_bytes``: an address-space limit breaks CUDA initialisation) by killing the
child's process group. When the child is gone it kills every other process it can see: inside the
bubblewrap sandbox (``isolation.py``) that is the whole PID namespace, so a double fork with
``setsid`` does not outlive the verdict.

The server answers ``{"event": "started", "pid": ...}`` and, when the child is gone,
``{"event": "exit", "code": ..., "signal": ..., "timed_out": ..., "memory_killed": ...,
"output": ...}``. Child processes never see the protocol pipe (fd 1 is replaced before any job
code runs).
"""

from __future__ import annotations

import contextlib
import json
import os
import resource
import select
import signal
import sys
import threading
import time


def _warm_imports() -> None:
    import numpy  # noqa: F401
    import torch  # noqa: F401
    import torch._dynamo  # noqa: F401  (imported lazily by torch's mode machinery otherwise:
    import triton  # noqa: F401
    import triton.language  # noqa: F401

    # after the child's seal, its import-time frame inspection (sympy) would be blocked)
    import drtriton.judge.worker  # noqa: F401

    if os.environ.get("TRITON_INTERPRET") == "1":
        import triton.runtime.interpreter  # noqa: F401
    else:
        _warm_triton_compiler()


def _warm_triton_compiler() -> None:
    """Work every child's first kernel launch would repeat, done once here and inherited by
    fork: the hash of Triton's own sources (``triton_key``, lru-cached; about 0.4 s of an H200
    child's 0.54 s first launch of a cached kernel) and the Gluon modules that kernel
    specialisation imports (about 0.12 s). Neither touches CUDA, which must not start before
    the fork."""
    try:
        from triton.runtime.cache import triton_key
    except ImportError:  # another Triton layout: children compute it themselves
        return
    triton_key()
    with contextlib.suppress(ImportError):
        import triton.experimental.gluon  # noqa: F401
        import triton.experimental.gluon.language  # noqa: F401
        import triton.experimental.gluon.nvidia  # noqa: F401


def _drain(fd: int, cap: int, done: threading.Event, sink: list[bytes]) -> None:
    """Read ``fd`` until EOF or ``done``; keep the first ``cap`` bytes, discard the rest."""
    kept = 0
    while True:
        ready, _, _ = select.select([fd], [], [], 0.05)
        if not ready:
            if done.is_set():
                return
            continue
        chunk = os.read(fd, 65536)
        if not chunk:
            return
        if kept < cap:
            sink.append(chunk[: cap - kept])
            kept += len(sink[-1])


def _child(request: dict, write_fd: int, proto_fd: int) -> None:
    """In the forked child: isolate, then run the job. Never returns."""
    code = 70
    try:
        os.close(proto_fd)  # the child must not be able to speak the protocol
        os.setsid()
        devnull = os.open(os.devnull, os.O_RDONLY)
        os.dup2(devnull, 0)
        os.dup2(write_fd, 1)
        os.dup2(write_fd, 2)
        os.close(write_fd)
        os.chdir(request["job_dir"])
        os.environ["HOME"] = request["job_dir"]
        os.environ["TMPDIR"] = request["job_dir"]
        os.environ["TRITON_CACHE_DIR"] = request["triton_cache_dir"]
        if request.get("memory_limit_bytes"):
            _limit_address_space(request["memory_limit_bytes"])
        from drtriton.judge.worker import sealed_run_job

        code = sealed_run_job()(request["job_dir"])
    except BaseException as exc:  # the report (or its absence) tells the judge what happened
        code = 71
        try:
            os.write(2, f"[drtriton] job failed outside the worker: {exc!r}\n".encode())
        except BaseException:
            pass
    finally:
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(code)


def _limit_address_space(extra_bytes: int) -> None:
    with open("/proc/self/statm") as f:
        current = int(f.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
    limit = current + extra_bytes
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))


def _serve_one(request: dict, proto) -> None:
    read_fd, write_fd = os.pipe()
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:
        os.close(read_fd)
        _child(request, write_fd, proto.fileno())
    os.close(write_fd)
    proto.write(json.dumps({"event": "started", "pid": pid}) + "\n")
    proto.flush()
    done, sink = threading.Event(), []
    drainer = threading.Thread(target=_drain, args=(read_fd, request["output_cap"], done, sink))
    drainer.start()
    status, timed_out, memory_killed = _wait(pid, request)
    # Grandchildren the candidate left behind die with its process group, or with the namespace.
    _kill(pid, group=True)
    if os.environ.get("DRTRITON_PID_NAMESPACE") == "1":
        _kill_namespace()
    done.set()
    drainer.join()
    os.close(read_fd)
    reply = {
        "event": "exit",
        "code": os.WEXITSTATUS(status) if os.WIFEXITED(status) else None,
        "signal": os.WTERMSIG(status) if os.WIFSIGNALED(status) else None,
        "timed_out": timed_out,
        "memory_killed": memory_killed,
        "output": b"".join(sink).decode("utf-8", "replace"),
    }
    proto.write(json.dumps(reply) + "\n")
    proto.flush()


def _wait(pid: int, request: dict) -> tuple[int, bool, bool]:
    """Wait for the child; kill it at its deadline or above its RSS limit."""
    deadline = time.monotonic() + float(request.get("timeout_s") or 1e9)
    rss_limit = int(request.get("rss_limit_bytes") or 0)
    timed_out = memory_killed = False
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return status, timed_out, memory_killed
        if not (timed_out or memory_killed):
            if time.monotonic() >= deadline:
                timed_out = True
            elif rss_limit and _rss_bytes(pid) > rss_limit:
                memory_killed = True
            if timed_out or memory_killed:
                _kill(pid, group=True)
        time.sleep(0.02)


def _rss_bytes(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def _kill(pid: int, group: bool = False) -> None:
    try:
        (os.killpg if group else os.kill)(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _kill_namespace() -> None:
    """Kill every process of this PID namespace but its init (pid 1) and this server."""
    me = os.getpid()
    for _ in range(3):  # a process may fork while the first pass runs
        others = [int(n) for n in os.listdir("/proc") if n.isdigit() and int(n) not in (1, me)]
        if not others:
            return
        for other in others:
            _kill(other)
        for other in others:
            try:
                os.waitpid(other, os.WNOHANG)
            except ChildProcessError:
                pass
        time.sleep(0.01)


def main() -> None:
    # Keep the protocol on a private copy of fd 1; stray prints (triton, torch) go to stderr.
    proto = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)
    _warm_imports()
    proto.write(json.dumps({"event": "ready", "pid": os.getpid()}) + "\n")
    proto.flush()
    for line in sys.stdin:
        if not line.strip():
            continue
        _serve_one(json.loads(line), proto)


if __name__ == "__main__":
    main()
