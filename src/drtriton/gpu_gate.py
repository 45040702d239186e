"""The GPU gate: how a judge child that times something asks for its GPU alone.

A gated child (reference timing, the compiler's convert-time tuning) starts sharing its GPU with
the other children of its slot, so that its imports, compiles and warm-up overlap theirs, and
calls ``gpu_alone()`` just before it times; ``gpu_shared()`` gives the GPU back for more untimed
work. Outside a gated job (no ``DRTRITON_GPU_GATE``) both are no-ops.

The protocol is files in the job's directory, which the child can write and the judge reads:
request ``n`` is ``gpu.req.<n>`` holding ``exclusive`` or ``shared``, written whole (renamed into
place), and the judge answers with ``gpu.ack.<n>`` once the lock is in that state. Only jobs that
run no candidate code are gated: a candidate could otherwise end its wait early.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

GATE_ENV = "DRTRITON_GPU_GATE"
POLL_S = 0.005


def request_path(folder: Path, n: int) -> Path:
    return folder / f"gpu.req.{n}"


def ack_path(folder: Path, n: int) -> Path:
    return folder / f"gpu.ack.{n}"


def gpu_alone() -> None:
    """Wait until this job has its GPU alone (a no-op outside a gated judge job)."""
    _request("exclusive")


def gpu_shared() -> None:
    """Share the GPU again: what follows is not timed (a no-op outside a gated judge job)."""
    _request("shared")


def _request(state: str) -> None:
    folder = os.environ.get(GATE_ENV)
    if not folder:
        return
    folder_path = Path(folder)
    n = sum(1 for _ in folder_path.glob("gpu.req.*"))
    staged = folder_path / f".gpu.req.{n}"
    staged.write_text(state)
    staged.rename(request_path(folder_path, n))
    while not ack_path(folder_path, n).exists():  # the job's own time limit bounds the wait
        time.sleep(POLL_S)
