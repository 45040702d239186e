"""The adversarial suite: candidate files with their expected verdicts, and legit candidates.

A case file declares ``EXPECTED = "status"`` (or ``{"cpu": ..., "cuda": ...}``) and optionally
``REFERENCE = "ref_file.py"`` (default ``ref_add_relu.py`` in the references directory),
``REASON`` (a text the verdict's reason must contain), ``HOST_PATHS`` (files that must not exist
on the host afterwards) and ``HOST_PROCESS`` (a command-line fragment no process on the host may
show afterwards). Case files are read with ``ast`` only: they are untrusted and never imported
here.

    PYTHONPATH=src python3 -m drtriton.judge.suite --device cpu
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import json
import os
import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from drtriton.devices import device_kind
from drtriton.judge.config import JudgeConfig
from drtriton.judge.pool import JudgePool
from drtriton.program import parse_python

REPO = Path(__file__).resolve().parents[3]
ADVERSARIAL_DIR = REPO / "tests" / "adversarial"
CASES_DIR = REPO / "tests" / "judge_cases"
DEFAULT_REFERENCE = "ref_add_relu.py"


@dataclass(frozen=True)
class Case:
    name: str
    path: Path
    reference: Path
    expected: str
    reason: str = ""
    host_paths: tuple[str, ...] = ()
    host_process: str = ""


def _constant(tree: ast.Module, name: str) -> object:
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == name for t in node.targets
        ):
            return ast.literal_eval(node.value)
    return None


def load_cases(
    device: str, adversarial: Path = ADVERSARIAL_DIR, cases: Path = CASES_DIR
) -> list[Case]:
    """Adversarial cases then legit candidates (``legit_*.py``, expected ``correct``)."""
    out = []
    for path in sorted(adversarial.glob("*.py")) + sorted(cases.glob("legit_*.py")):
        text = path.read_text()
        try:
            tree = parse_python(text)
        except SyntaxError:  # a syntax-error case states its expectation in a comment-free way
            lines = [ln for ln in text.splitlines() if ln.startswith("EXPECTED")]
            tree = parse_python("\n".join(lines))
        expected = _constant(tree, "EXPECTED") or "correct"
        if isinstance(expected, dict):
            expected = expected[device_kind(device)]
        reference = _constant(tree, "REFERENCE") or DEFAULT_REFERENCE
        out.append(
            Case(
                path.stem,
                path,
                cases / reference,
                expected,
                _constant(tree, "REASON") or "",
                tuple(_constant(tree, "HOST_PATHS") or ()),
                _constant(tree, "HOST_PROCESS") or "",
            )
        )
    return out


def host_escapes(case: Case) -> list[str]:
    """What of a case reached the host: files that exist, processes still running."""
    found = [p for p in case.host_paths if os.path.exists(p)]
    if case.host_process:
        for pid in os.listdir("/proc"):
            try:
                with open(f"/proc/{pid}/cmdline", "rb") as f:
                    cmdline = f.read().replace(b"\0", b" ").decode(errors="replace")
            except OSError:
                continue
            if case.host_process in cmdline:
                found.append(f"process {pid}: {cmdline.strip()}")
    return found


def case_problem(case: Case, verdict) -> str | None:
    """Why a verdict does not meet its case, or None."""
    if verdict.status != case.expected:
        return f"expected {case.expected}, got {verdict.status}: {verdict.reason[:200]}"
    if case.reason and case.reason not in verdict.reason:
        return f"reason {verdict.reason[:200]!r} lacks {case.reason!r}"
    escaped = host_escapes(case)
    return f"reached the host: {escaped}" if escaped else None


LISTENER_PORT = 47561  # tests/adversarial/network_connect.py connects here


@contextlib.contextmanager
def loopback_listener(port: int = LISTENER_PORT) -> Iterator[list]:
    """Listen on the host's 127.0.0.1:``port`` while the suite runs; yields the peers accepted."""
    accepted: list = []
    server = socket.socket()
    server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    server.bind(("127.0.0.1", port))
    server.listen()
    server.settimeout(0.2)
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                conn, peer = server.accept()
            except OSError:
                continue
            accepted.append(peer)
            conn.close()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield accepted
    finally:
        stop.set()
        thread.join()
        server.close()


def run_suite(
    config: JudgeConfig, workers: int | None = None, only: list[str] | None = None
) -> list[dict]:
    """Judge every case; one row per case with expected, got and whether they match."""
    device = config.resolved_device()
    cases = [c for c in load_cases(device) if not only or c.name in only]
    pairs = [(c.reference.read_text(), c.path.read_text()) for c in cases]
    t0 = time.monotonic()
    with loopback_listener() as accepted, JudgePool(config, workers) as pool:
        verdicts = pool.verify_many(pairs)
    if accepted:
        raise RuntimeError(f"a candidate reached the host's loopback listener: {accepted}")
    rows = []
    for case, verdict in zip(cases, verdicts, strict=True):
        problem = case_problem(case, verdict)
        rows.append(
            {
                "case": case.name,
                "expected": case.expected,
                "got": verdict.status,
                "ok": problem is None,
                "problem": problem or "",
                "reason": verdict.reason[:200],
                "wall_s": round(verdict.wall_s, 3),
                "verdict": verdict.to_dict(),
            }
        )
    rows.append({"total_wall_s": time.monotonic() - t0})
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="auto")
    parser.add_argument("--timeout-s", type=float, default=20.0)
    parser.add_argument("--workers", type=int, default=None)
    # a low cap makes the memory-hog case fail fast, well inside its wall-clock limit
    parser.add_argument("--memory-limit-gb", type=float, default=2.0)
    parser.add_argument("--only", nargs="*")
    parser.add_argument("--unsafe-no-sandbox", action="store_true",
                        help="judge without bubblewrap (to see which cases then escape)")
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    config = JudgeConfig(
        device=args.device,
        timeout_s=args.timeout_s,
        memory_limit_gb=args.memory_limit_gb,
        unsafe_no_sandbox=args.unsafe_no_sandbox,
    )
    rows = run_suite(config, args.workers, args.only)
    for row in rows[:-1]:
        mark = "ok  " if row["ok"] else "FAIL"
        detail = row["problem"] or row["reason"]
        print(
            f"{mark} {row['case']:<24} expected={row['expected']:<14} got={row['got']:<14} "
            f"{detail[:90]}"
        )
    print(
        f"{sum(r['ok'] for r in rows[:-1])}/{len(rows) - 1} as expected in "
        f"{rows[-1]['total_wall_s']:.1f} s"
    )
    if args.json:
        from drtriton.provenance import machine_record

        rows[-1]["environment"] = machine_record()  # the totals row: where and at which commit
        args.json.write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
