"""Where and with what something ran: the one source of every provenance record.

Benchmarks (``machine_record``), verdicts (``judge.pair.environment_record``), the search's
verdict cache and bench rows all build their records from these functions, so a version, a GPU
name or a commit is read one way everywhere.
"""

from __future__ import annotations

import contextlib
import datetime
import hashlib
import os
import platform
import subprocess
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent  # src/drtriton
REPO = PACKAGE.parents[1]
OPTIONAL_LIBRARIES = ("triton", "ortools")  # recorded as None where missing


def library_versions(names: tuple[str, ...] = ("torch", "triton")) -> dict[str, str | None]:
    """``{name: version}`` for importable libraries, None for missing ones."""
    versions: dict[str, str | None] = {}
    for name in names:
        try:
            versions[name] = __import__(name).__version__
        except Exception:  # a missing optional library is recorded as absent
            versions[name] = None
    return versions


def gpu_record(device: str) -> dict:
    """The GPU behind ``device`` ("cuda", "cuda:N"): its name, driver and CUDA version; for
    the CPU, the processor's name and no driver."""
    import torch

    if not device.startswith("cuda"):
        return {"device_name": cpu_model(), "driver": None}
    return {
        "device_name": torch.cuda.get_device_name(torch.device(device)),
        "driver": nvidia_driver(),
        "cuda": torch.version.cuda,
    }


def cpu_model() -> str:
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor() or platform.machine()


def nvidia_driver() -> str | None:
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


def git_commit(root: Path | None = None) -> str | None:
    """HEAD's short hash, marked -dirty when tracked files differ from it.

    ``DRTRITON_COMMIT`` overrides it: a copy of the tree on another machine (the lent GPU) can
    carry a stale ``.git``, which stamped rows with a commit that did not run.
    """
    if os.environ.get("DRTRITON_COMMIT"):
        return os.environ["DRTRITON_COMMIT"]
    try:
        commit = _git(root or REPO, "rev-parse", "--short", "HEAD")
        dirty = _git(root or REPO, "status", "--porcelain", "-uno")
    except OSError:
        return None
    return (commit + "-dirty" if dirty else commit) or None


def _git(root: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=root, capture_output=True, text=True).stdout.strip()


def source_digest() -> str:
    """First 12 hex digits of a SHA-256 over the package's source files: what actually ran."""
    digest = hashlib.sha256()
    for path in sorted(PACKAGE.rglob("*.py")):
        digest.update(str(path.relative_to(PACKAGE)).encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()[:12]


def utc_now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")


def machine_record(root: Path | None = None) -> dict:
    """Where and with what a benchmark ran."""
    import torch

    return {
        "date": utc_now(),
        "host_cpu": cpu_model(),
        "cpu_count": os.cpu_count(),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "gpu": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None,
        "git_commit": git_commit(root),
        "source_sha": source_digest(),
        **library_versions(OPTIONAL_LIBRARIES),
    }
