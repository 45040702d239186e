"""Synthesis settings and records: ``SynthConfig``, the JSONL ``SynthProgram`` and its I/O."""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

from drtriton.devices import is_device_name
from drtriton.ops.scales import SCALES

MAX_LEVEL = 64
DEVICES = "cpu, cuda or cuda:N"  # where a synthesis run's checks may execute


class SynthError(ValueError):
    """Unusable synthesis settings, or no valid program could be found."""


@dataclass(frozen=True)
class SynthConfig:
    """Settings of one synthesis run."""

    level: int
    num: int
    seed: int = 0
    scale: str = "small"
    workers: int = 1
    check: str = (
        "auto"  # "run" (execute + filters), "meta" (shapes only), "none"; auto: run if feasible
    )
    device: str = "cpu"  # where "run" checks execute
    max_attempts: int = 100  # draws per program before giving up
    solver_budget: float | None = None  # CP-SAT deterministic time per solve; None: per scale
    start_index: int = 0  # first program index (lets a run be resumed or sharded)

    def validate(self) -> None:
        if not 1 <= self.level <= MAX_LEVEL:
            raise SynthError(f"level must be between 1 and {MAX_LEVEL}, got {self.level}")
        if self.num < 1:
            raise SynthError(f"num must be at least 1, got {self.num}")
        if self.scale not in SCALES:
            raise SynthError(f"unknown scale {self.scale!r}; choose one of {', '.join(SCALES)}")
        if self.check not in ("auto", "run", "meta", "none"):
            raise SynthError(f"unknown check {self.check!r}; choose auto, run, meta or none")
        if self.workers < 1:
            raise SynthError(f"workers must be at least 1, got {self.workers}")
        if self.start_index < 0:
            raise SynthError(f"start index must be at least 0, got {self.start_index}")
        if not is_device_name(self.device, auto=False):
            raise SynthError(f"unknown device {self.device!r}; choose {DEVICES}")

    def budget(self) -> float:
        # Most solves finish in a few thousandths; a draw that thrashes is cheaper to redraw.
        return self.solver_budget or {"small": 0.05}.get(self.scale, 0.1)

    def check_mode(self) -> str:
        if self.check != "auto":
            return self.check
        # GPU-scale programs need up to tens of GiB: only run them on a GPU.
        return "run" if self.scale == "small" or self.device.startswith("cuda") else "meta"


@dataclass(frozen=True)
class SynthProgram:
    """One synthesized program: the JSONL record (loadable with ``datasets``)."""

    id: str  # content hash of the source
    level: int
    index: int
    seed: int
    scale: str
    ops: list[str]
    source: str
    flops: int
    total_numel: int  # elements of all tensors (inputs, intermediates, outputs)
    input_shapes: list[list[int]]
    output_shapes: list[list[int]]
    output_dtypes: list[str]
    attempts: int  # draws it took (1 = first draw valid)
    checked: str  # which check it passed: run, meta or none

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)

    @classmethod
    def from_dict(cls, row: dict) -> SynthProgram:
        return cls(**{k: row[k] for k in cls.__dataclass_fields__})


@dataclass(frozen=True)
class SynthResult:
    """A program with the reasons its rejected draws failed."""

    program: SynthProgram
    rejected: dict[str, int] = field(default_factory=dict)


def write_jsonl(programs: Sequence[SynthProgram], path: str | os.PathLike) -> None:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w") as f:
        for p in programs:
            f.write(p.to_json() + "\n")


def read_jsonl(path: str | os.PathLike) -> list[SynthProgram]:
    """The programs of a synthesis JSONL file; ``SynthError`` names the file (and line) of any
    problem: not a file, not JSON, a record without the program fields."""
    path = Path(path)
    try:
        with path.open() as f:
            return [_record(path, n, line) for n, line in enumerate(f, 1) if line.strip()]
    except (OSError, UnicodeDecodeError) as exc:
        raise SynthError(f"cannot read {path}: {getattr(exc, 'strerror', None) or exc}") from None


def _record(path: Path, number: int, line: str) -> SynthProgram:
    try:
        row = json.loads(line)
    except json.JSONDecodeError as exc:
        raise SynthError(f"{path}:{number}: not JSON ({exc.msg})") from None
    fields = SynthProgram.__dataclass_fields__
    missing = [k for k in fields if not isinstance(row, dict) or k not in row]
    if missing:
        raise SynthError(f"{path}:{number}: not a synthesized program (no {', '.join(missing)})")
    return SynthProgram.from_dict(row)


def finished_prefix(path: Path, config: SynthConfig) -> tuple[int, int]:
    """(programs, bytes) of the records at the start of an interrupted run's ``.partial`` file
    that this run would write again, byte for byte: complete lines holding programs
    ``start_index, start_index + 1, ...`` of the same level, seed, scale and check. A truncated
    last line (the run was killed while writing it) is not counted; a record of another run is
    a ``SynthError``, so that a different command never overwrites what a run made."""
    count = size = 0
    with path.open("rb") as f:
        for raw in f:
            if not raw.endswith(b"\n"):
                break
            if count == config.num:
                raise SynthError(f"{path} holds more than --num {config.num} programs; rerun "
                                 "the command that made it or remove the file")
            try:
                program = SynthProgram.from_dict(json.loads(raw))
            except (ValueError, KeyError, TypeError):
                raise SynthError(f"{path}:{count + 1}: not a program record; remove the file "
                                 "to start over") from None
            if not _continues(program, config, config.start_index + count):
                raise SynthError(f"{path} holds programs of another run (level {program.level}, "
                                 f"seed {program.seed}, scale {program.scale}, index "
                                 f"{program.index}); rerun that command or remove the file")
            count, size = count + 1, size + len(raw)
    return count, size


def _continues(program: SynthProgram, config: SynthConfig, index: int) -> bool:
    same = (program.level, program.seed, program.scale, program.index, program.checked)
    return same == (config.level, config.seed, config.scale, index, config.check_mode())
