"""The judge's result record (``Verdict``) and the environment it was measured in."""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from typing import Any

STATUSES = (
    "correct",
    "incorrect",
    "rejected",
    "compile_error",
    "runtime_error",
    "timeout",
    "crashed",
)


@dataclass(frozen=True)
class Verdict:
    """One judgement of a (reference, candidate) pair. Times are milliseconds."""

    status: str
    reason: str = ""
    max_abs_err: float | None = None
    max_rel_err: float | None = None
    # precision parity: relative RMS errors against the float64 oracle (worst output and trial)
    oracle_err: float | None = None  # the candidate's
    reference_oracle_err: float | None = None  # the fp32 reference's own, on that output
    oracle_note: str = ""  # why parity was not checked, when it was not
    runtime_ms: float | None = None
    runtime_p20_ms: float | None = None
    runtime_p80_ms: float | None = None
    eager_ms: float | None = None
    compile_ms: float | None = None
    speedup_eager: float | None = None
    speedup_compile: float | None = None
    suspicious: bool = False
    triton_launches: int = 0
    timed_calls: int = 0  # the candidate's timed repetitions (fewer for slow programs)
    trials: int = 0
    wall_s: float = 0.0
    phase_s: dict[str, float] = field(default_factory=dict)  # where wall_s went, per phase
    # reference / timing_reference / baselines; <child>:kernels when a child loaded stored ones
    cache_hits: list[str] = field(default_factory=list)
    # per child, kernels and C modules it loaded from the kernel store and built itself (as the
    # child reports them: information, not evidence)
    kernels: dict[str, dict[str, int]] = field(default_factory=dict)
    baselines_measured: str = ""  # when the eager/compile timings were measured ("now" or a date)
    stdout_tail: str = ""
    environment: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.status not in STATUSES:
            raise ValueError(f"unknown verdict status {self.status!r}")

    @property
    def ok(self) -> bool:
        return self.status == "correct"

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), sort_keys=True)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Verdict:
        names = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in names})

    def report_lines(self) -> list[str]:
        """What a command prints for one verdict: its status line, then its speedups if timed."""
        line = f"verdict: {self.status}"
        if self.max_abs_err is not None:
            line += f" (max abs err {self.max_abs_err:.3g})"
        if self.reason:
            line += f" - {self.reason}"
        if self.speedup_eager is None:
            return [line]
        versus = f", {self.speedup_compile:.2f}x vs torch.compile" if self.speedup_compile else ""
        return [line, f"speedup: {self.speedup_eager:.2f}x vs eager{versus} "
                      f"({self.runtime_ms:.3f} ms vs {self.eager_ms:.3f} ms)"]

    def summary(self) -> str:
        """One human line (a group's candidates, one per line)."""
        parts = [self.status]
        if self.reason:
            parts.append(self.reason)
        if self.max_abs_err is not None:
            parts.append(f"max_abs_err={self.max_abs_err:.3g} max_rel_err={self.max_rel_err:.3g}")
        if self.runtime_ms is not None:
            parts.append(f"runtime={self.runtime_ms:.4f}ms")
        if self.speedup_eager is not None:
            parts.append(f"speedup_eager={self.speedup_eager:.2f}x")
        if self.speedup_compile is not None:
            parts.append(f"speedup_compile={self.speedup_compile:.2f}x")
        if self.suspicious:
            parts.append("SUSPICIOUS")
        return " | ".join(parts)
