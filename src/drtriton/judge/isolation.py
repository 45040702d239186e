"""OS-level isolation of the judge's sandbox servers with bubblewrap (``bwrap``).

Every fork server (and so every child that runs untrusted code: candidates, and references that
come from users) is started inside one bubblewrap sandbox with its own user, PID, mount, network,
IPC, UTS and cgroup namespaces:

* the whole file system is mounted read-only; ``/tmp``, ``/var/tmp`` and ``/dev/shm`` are fresh
  in-memory file systems private to the sandbox; only the slot's scratch directory is writable
  and shared with the judge;
* a private ``/proc`` shows only the sandbox's own processes: the judge, its siblings and their
  environments or memory are invisible and cannot be signalled;
* the network namespace holds only its own loopback device: no connection leaves the sandbox,
  not even to the host's 127.0.0.1;
* no capabilities; a new session (no terminal injection); the server exits when the judge
  closes its stdin, and with it the whole sandbox;
* on CUDA the GPU device nodes of the slot's GPU and the driver's control nodes are the only
  devices beyond /dev/null and friends.

The server kills every other process of its PID namespace after each job, so nothing a candidate
starts outlives its verdict (``server.py``). Without bubblewrap the judge refuses to run
untrusted code unless the caller opts out with ``unsafe_no_sandbox`` (``--unsafe-no-sandbox``);
every verdict records which isolation it ran under (``environment["sandbox"]``).
"""

from __future__ import annotations

import functools
import glob
import os
import re
import shutil
import subprocess

BWRAP_ENV = "DRTRITON_BWRAP"  # path of a bwrap binary to use instead of the one on PATH
INSTALL_HINT = (
    "install bubblewrap (Debian/Ubuntu: apt-get install bubblewrap; `make sandbox` does it as "
    "root), or pass --unsafe-no-sandbox to run untrusted code without OS isolation"
)
_NAMESPACES = "user, pid, mount, net, ipc, uts, cgroup"
_PRIVATE = ("/tmp", "/var/tmp", "/dev/shm")  # fresh, empty file systems inside the sandbox


class SandboxUnavailable(RuntimeError):
    """No OS sandbox can be started here, and the caller did not opt out."""


def bwrap_path() -> str | None:
    """The bubblewrap binary: ``$DRTRITON_BWRAP``, else ``bwrap`` on PATH, else None."""
    chosen = os.environ.get(BWRAP_ENV)
    if chosen:
        return chosen if os.access(chosen, os.X_OK) else None
    return shutil.which("bwrap")


@functools.lru_cache(maxsize=4)
def probe(binary: str) -> str:
    """Start one trivial sandbox with the flags the judge uses; '' when it works, else why not."""
    command = [binary, *_base_flags(), "--", "/bin/true"]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"{type(exc).__name__}: {exc}"
    if done.returncode != 0:
        return (done.stderr.strip() or f"exit code {done.returncode}").splitlines()[-1]
    return ""


@functools.lru_cache(maxsize=4)
def _version(binary: str) -> str:
    try:
        out = subprocess.run([binary, "--version"], capture_output=True, text=True, timeout=10)
        return out.stdout.strip() or "bubblewrap"
    except (OSError, subprocess.TimeoutExpired):
        return "bubblewrap"


def describe(binary: str | None) -> str:
    """What goes into ``environment["sandbox"]``."""
    if binary is None:
        return "none (--unsafe-no-sandbox: untrusted code ran without OS isolation)"
    return f"{_version(binary)} ({_NAMESPACES} namespaces; read-only root; no network)"


def resolve(unsafe_no_sandbox: bool) -> str | None:
    """The bwrap binary to use, None when running unsandboxed was asked for; raises otherwise."""
    binary = bwrap_path()
    if binary is None:
        if unsafe_no_sandbox:
            return None
        raise SandboxUnavailable(f"the judge's sandbox needs bubblewrap (bwrap): {INSTALL_HINT}")
    problem = probe(binary)
    if problem:
        if unsafe_no_sandbox:
            return None
        raise SandboxUnavailable(f"bubblewrap cannot create its namespaces here ({problem}); "
                                 f"{INSTALL_HINT}")
    return binary


def _base_flags() -> list[str]:
    # No --die-with-parent: it ties the sandbox to the *thread* that started it (PR_SET_PDEATHSIG),
    # and the judge starts servers from worker threads that exit. A server ends when its stdin
    # closes, so the sandbox still dies with the judge.
    flags = ["--unshare-all", "--new-session", "--cap-drop", "ALL"]
    flags += ["--ro-bind", "/", "/", "--proc", "/proc", "--dev", "/dev"]
    for private in _PRIVATE:
        if os.path.isdir(private):
            flags += ["--tmpfs", private]
    return flags


def visible_again(paths: list[str]) -> list[str]:
    """The paths among ``paths`` that the private file systems would hide (a checkout or a venv
    under /tmp, as a CI clone may be): they are bound back read-only."""
    found = []
    for path in sorted({os.path.realpath(p) for p in paths if p and os.path.exists(p)}):
        hidden = any(path == d or path.startswith(d + os.sep) for d in _PRIVATE)
        if hidden and not any(path.startswith(f + os.sep) for f in found):
            found.append(path)
    return found


def command(
    binary: str,
    scratch: str,
    argv: list[str],
    gpu_minor: int | None,
    info_fd: int,
    code_paths: list[str] = (),
) -> list[str]:
    """The bwrap command that runs ``argv`` with only ``scratch`` writable. bwrap writes the
    host pid of the sandbox's init to ``info_fd``: killing it ends every process inside.
    ``code_paths`` (the interpreter's prefix, the package, sys.path) must stay visible."""
    flags = _base_flags() + ["--info-fd", str(info_fd)]
    for path in visible_again(list(code_paths)):
        flags += ["--ro-bind", path, path]
    scratch = os.path.realpath(scratch)
    flags += ["--bind", scratch, scratch, "--chdir", scratch]
    for node in gpu_device_nodes(gpu_minor):
        flags += ["--dev-bind", node, node]
    return [binary, *flags, "--", *argv]


def read_init_pid(fd: int, timeout_s: float = 30.0) -> int | None:
    """The ``child-pid`` bwrap reports on its info fd (then closed), or None."""
    import json
    import select

    data = b""
    while True:
        ready, _, _ = select.select([fd], [], [], timeout_s)
        chunk = os.read(fd, 4096) if ready else b""
        if not chunk:
            break
        data += chunk
    os.close(fd)
    try:
        return int(json.loads(data.decode())["child-pid"])
    except (ValueError, KeyError, TypeError):
        return None


def gpu_device_nodes(gpu_minor: int | None) -> list[str]:
    """The NVIDIA nodes a process driving one GPU needs: control, UVM, and that GPU's node.

    ``gpu_minor`` None means no GPU (CPU judging); -1 means the minor number is unknown, and
    every GPU node is passed through.
    """
    if gpu_minor is None:
        return []
    nodes = [p for p in ("/dev/nvidiactl", "/dev/nvidia-uvm", "/dev/nvidia-uvm-tools")
             if os.path.exists(p)]
    nodes += sorted(glob.glob("/dev/nvidia-caps/*"))
    if gpu_minor >= 0 and os.path.exists(f"/dev/nvidia{gpu_minor}"):
        nodes.append(f"/dev/nvidia{gpu_minor}")
    else:
        nodes += sorted(p for p in glob.glob("/dev/nvidia*") if re.fullmatch(r"/dev/nvidia\d+", p))
    return nodes


def gpu_minor_for(domain: int, bus: int, device: int) -> int:
    """The /dev/nvidiaN minor of the GPU at PCI ``domain:bus:device`` (the driver's /proc files);
    -1 when it cannot be found."""
    folder = f"{domain:04x}:{bus:02x}:{device:02x}."
    for info in glob.glob("/proc/driver/nvidia/gpus/*/information"):
        if not os.path.basename(os.path.dirname(info)).lower().startswith(folder):
            continue
        try:
            with open(info) as f:
                match = re.search(r"Device Minor:\s*(\d+)", f.read())
        except OSError:
            continue
        if match:
            return int(match.group(1))
    return -1
