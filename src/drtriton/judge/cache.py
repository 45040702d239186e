"""What the judge computes once and reuses: reference runs (in memory) and baselines (on disk).

* ``ReferenceCache``: a reference's outputs and input fingerprints per (reference source, model
  seed, input seeds, device, precision). Every candidate of a group (an RL group, a search's
  candidates, a bench row judged in two modes) is judged against one run; concurrent callers of
  one key wait for the first. Kept in memory (GPU-scale outputs are GBs), a few entries.
* ``BaselineCache``: eager and ``torch.compile`` timings per (reference source, GPU, library
  versions, precision, timing settings), in SQLite. Each row keeps its whole measurement (median,
  p20/p80, calls, date, environment), so a cached baseline says where it came from; a verdict
  that used one lists ``baselines`` in ``Verdict.cache_hits``. Timings do not depend on the
  input values, so the key leaves the seeds out.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from pathlib import Path
from typing import Any

from drtriton.scratch import cache_path

BASELINE_CACHE_ENV = "DRTRITON_BASELINE_CACHE"


def source_key(source: str) -> str:
    return hashlib.sha256(source.encode()).hexdigest()


def default_baseline_cache() -> Path:
    """``$DRTRITON_BASELINE_CACHE``, else ``$XDG_CACHE_HOME/drtriton/baselines.sqlite``."""
    return cache_path("baselines.sqlite", BASELINE_CACHE_ENV)


class ReferenceCache:
    """An LRU of reference runs; ``get`` computes a missing entry once per key.

    It keeps ``capacity`` entries, and more while they are small: up to ``small_capacity``
    entries while they hold at most ``small_bytes`` together (``size(value)``), so that many
    groups of small programs judged at once (RL, pairs) do not evict each other's reference
    before their candidates are judged, while GPU-scale outputs (GBs) stay few.

    A ``compute`` that raises one of ``remembered`` (an invalid reference) is not run again for
    its key: the error is raised to the later callers too, for the ``small_capacity`` most
    recent such keys (a group's candidates would otherwise each rerun a failing reference)."""

    def __init__(self, capacity: int = 2, size: Callable[[Any], int] | None = None,
                 small_bytes: int = 256 << 20, small_capacity: int = 64,
                 remembered: tuple[type[BaseException], ...] = ()) -> None:
        self.capacity = capacity
        self.remembered = remembered
        self._failures: OrderedDict[tuple, BaseException] = OrderedDict()
        self.size = size
        self.small_bytes, self.small_capacity = small_bytes, small_capacity
        self._entries: OrderedDict[tuple, Any] = OrderedDict()
        self._bytes: dict[tuple, int] = {}
        self._locks: dict[tuple, threading.Lock] = {}
        self._guard = threading.Lock()

    def get(self, key: tuple, compute: Callable[[], Any]) -> tuple[Any, bool]:
        """(value, whether it was cached)."""
        with self._guard:
            lock = self._locks.setdefault(key, threading.Lock())
        with lock:
            with self._guard:
                if key in self._entries:
                    self._entries.move_to_end(key)
                    return self._entries[key], True
                if key in self._failures:
                    raise self._failures[key]
            try:
                value = compute()
            except self.remembered as exc:
                with self._guard:
                    self._failures[key] = exc
                    while len(self._failures) > self.small_capacity:
                        self._failures.popitem(last=False)
                raise
            with self._guard:
                self._entries[key] = value
                self._bytes[key] = self.size(value) if self.size else self.small_bytes + 1
                while len(self._entries) > self.capacity and self._over():
                    old, _ = self._entries.popitem(last=False)
                    del self._bytes[old]
            return value, False

    def _over(self) -> bool:
        return (len(self._entries) > self.small_capacity
                or sum(self._bytes.values()) > self.small_bytes)


class BaselineCache:
    """Eager and torch.compile timings of references, in one SQLite file."""

    def __init__(self, path: Path | str) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        with self._connect() as db:
            db.execute(
                "CREATE TABLE IF NOT EXISTS baselines (key TEXT PRIMARY KEY, measured TEXT, "
                "record TEXT)"
            )

    def _connect(self) -> sqlite3.Connection:
        return sqlite3.connect(self.path, timeout=30)

    @staticmethod
    def key(source: str, environment: dict, timing: dict) -> str:
        parts = {
            "source": source_key(source),
            "device": environment.get("device_name"),
            "driver": environment.get("driver"),
            "torch": environment.get("torch"),
            "triton": environment.get("triton"),
            "cuda": environment.get("cuda"),
            "precision": environment.get("precision"),
            "timing": timing,
        }
        return hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()

    def load(self, key: str) -> dict | None:
        with self._lock, self._connect() as db:
            row = db.execute("SELECT record FROM baselines WHERE key = ?", (key,)).fetchone()
        return json.loads(row[0]) if row else None

    def store(self, key: str, record: dict) -> None:
        measured = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        record = {**record, "measured": measured}
        with self._lock, self._connect() as db:
            db.execute(
                "INSERT OR REPLACE INTO baselines VALUES (?, ?, ?)",
                (key, measured, json.dumps(record, sort_keys=True)),
            )
