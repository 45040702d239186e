"""Scratch directories that a killed run does not leave behind for good.

``claim_scratch(root, prefix)`` creates a fresh directory (``tempfile.mkdtemp``) and writes an
``owner`` file into it: the process id and its start time. It then removes the sibling
directories of the same prefix whose owner is dead. A directory is only ever removed when its
owner file names a process that no longer exists (a reused pid has another start time), so a
live run's directory, or one too new to have its owner file yet, is never touched.

``cache_path(name, env)`` is where files that outlive runs go: ``$env`` when set, else
``$XDG_CACHE_HOME/drtriton/name`` (``~/.cache/drtriton/name``).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

OWNER_FILE = "owner"


def cache_path(name: str, env: str | None = None) -> Path:
    """``$env`` when it is set, else ``name`` in drtriton's folder of the user's cache."""
    chosen = os.environ.get(env) if env else None
    if chosen:
        return Path(chosen)
    root = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return root / "drtriton" / name


def claim_scratch(root: str | os.PathLike | None, prefix: str) -> str:
    """A new directory ``root/prefix*`` owned by this process; stale siblings are removed."""
    path = tempfile.mkdtemp(prefix=prefix, dir=root)
    (Path(path) / OWNER_FILE).write_text(_identity(os.getpid()))
    remove_stale(Path(path).parent, prefix, keep=path)
    return path


@contextlib.contextmanager
def scratch_dir(root: str | os.PathLike | None, prefix: str) -> Iterator[str]:
    """``claim_scratch`` for the length of a ``with`` block, removed at its end."""
    path = claim_scratch(root, prefix)
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def remove_stale(root: Path, prefix: str, keep: str | None = None) -> list[Path]:
    """Remove the directories ``root/prefix*`` whose owner process is dead; returns them."""
    removed = []
    for entry in root.glob(f"{glob_escape(prefix)}*"):
        if str(entry) != keep and _is_stale(entry):
            shutil.rmtree(entry, ignore_errors=True)
            removed.append(entry)
    return removed


def glob_escape(text: str) -> str:
    """``text`` as a literal glob pattern (a prefix may hold ``[`` or ``*``)."""
    return "".join(f"[{c}]" if c in "*?[" else c for c in text)


def _is_stale(entry: Path) -> bool:
    try:
        if entry.is_symlink() or not entry.is_dir() or entry.stat().st_uid != os.getuid():
            return False  # not ours to judge (or to remove)
        owner = (entry / OWNER_FILE).read_text().split()
        pid = int(owner[0])
    except (OSError, ValueError, IndexError):
        return False  # no owner file yet (just created) or unreadable: leave it alone
    return _identity(pid).split() != owner


def _identity(pid: int) -> str:
    """``"PID START"``: the start time tells a live owner from a later process given its pid;
    ``"PID"`` alone where the start time cannot be read; ``""`` for a dead process."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return ""
    except PermissionError:
        pass  # alive, owned by another user
    start = _start_time(pid)
    return f"{pid} {start}" if start else str(pid)


def _start_time(pid: int) -> str:
    """The process's start time in clock ticks since boot (Linux ``/proc``), else ``""``."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return ""
    # the command name (field 2) may hold spaces and parentheses: fields resume after the last ")"
    fields = stat[stat.rindex(")") + 2:].split()
    return fields[19]  # field 22 of stat(5): starttime
