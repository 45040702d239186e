"""The GPU gate: how a judge child that times something asks for its GPU alone.

A gated child says how it uses its GPU as it goes, so that a slot's other children are held up
only while it times: ``gpu_alone()`` just before it times something, ``gpu_shared()`` for
untimed GPU work, ``gpu_unused()`` for work on the host alone (capture, code generation, Triton
compiles). The baselines child starts shared; the compiler's child (convert-time tuning) starts
with no hold. Outside a gated job (no ``DRTRITON_GPU_GATE``) these are no-ops.

The protocol is files in the job's directory, which the child can write and the judge reads:
request ``n`` is ``gpu.req.<n>`` holding ``exclusive``, ``shared`` or ``none``, written whole
(renamed into place), and the judge answers with ``gpu.ack.<n>`` once the lock is in that state.
Only jobs that run no candidate code are gated: a candidate could otherwise end its wait early,
or use the GPU while it holds nothing.
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
    """Share the GPU: what follows uses it untimed (a no-op outside a gated judge job)."""
    _request("shared")


def gpu_unused() -> None:
    """Hold no part of the GPU: what follows runs on the host alone (a no-op outside a gated
    judge job)."""
    _request("none")


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
