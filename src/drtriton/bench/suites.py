"""Suites of hand-written programs (the real-model suite): a folder of KernelBench-format files
and a manifest, ``suite.json``, that names each program's family, the model it comes from and
its CPU-size variant (top-level size constants replaced, the code unchanged).

    python -m drtriton.bench.suites check benchmarks/suites/real [--part parts/X.json]

runs every program's CPU variant once and measures its published size on the meta device:
heavy-op FLOPs (matrix products and convolutions) and the minimum bytes any implementation must
move (inputs, parameters and outputs once each).
"""

from __future__ import annotations

import ast
import json
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from drtriton.program import TORCH_STATE_LOCK, load_program, parse_python

MANIFEST = "suite.json"


@dataclass(frozen=True)
class SuiteProgram:
    """One program of a suite: ``file`` in the suite folder, ``cpu`` its CPU-size constants."""

    name: str
    file: str
    family: str
    model: str
    cpu: dict = field(default_factory=dict)


def load_suite(folder: str | Path, manifest: str | Path | None = None) -> list[SuiteProgram]:
    """The programs a manifest lists (default ``folder/suite.json``), in its order."""
    folder = Path(folder)
    path = Path(manifest) if manifest else folder / MANIFEST
    if not path.exists():
        raise FileNotFoundError(f"no suite manifest {path}")
    entries = json.loads(path.read_text())
    entries = entries["programs"] if isinstance(entries, dict) else entries
    programs = []
    for entry in entries:
        file = entry["file"]
        if not (folder / file).exists():
            raise FileNotFoundError(f"{path}: no program {folder / file}")
        programs.append(SuiteProgram(Path(file).stem, file, entry.get("family", ""),
                                     entry.get("model", ""), dict(entry.get("cpu", {}))))
    names = [p.name for p in programs]
    if len(set(names)) != len(names):
        raise ValueError(f"{path}: program names repeat")
    return programs


def _literal(value) -> str:
    """A manifest value as source: ``{"expr": "torch.float16"}`` verbatim, else its repr."""
    return value["expr"] if isinstance(value, dict) else repr(value)


def sized_source(source: str, sizes: dict) -> str:
    """``source`` with its top-level ``NAME = value`` / ``A, B = x, y`` constants in ``sizes``
    replaced (the CPU-size variant of a program); a value ``{"expr": CODE}`` is written as
    CODE (a dtype, say)."""
    lines = source.splitlines()
    seen: set[str] = set()
    for node in parse_python(source).body:
        if not isinstance(node, ast.Assign) or len(node.targets) != 1:
            continue
        target = node.targets[0]
        names = [target] if isinstance(target, ast.Name) else getattr(target, "elts", [])
        ids = [n.id for n in names if isinstance(n, ast.Name)]
        if not ids or not any(i in sizes for i in ids) or node.lineno != node.end_lineno:
            continue
        if len(ids) == 1:
            new = f"{ids[0]} = {_literal(sizes[ids[0]])}"
        else:
            values = [ast.unparse(e) for e in node.value.elts]
            new = f"{', '.join(ids)} = " + ", ".join(
                _literal(sizes[i]) if i in sizes else v for i, v in zip(ids, values, strict=True)
            )
        lines[node.lineno - 1] = new
        seen |= set(ids)
    missing = sorted(set(sizes) - seen)
    if missing:
        raise ValueError(f"no one-line top-level assignment of {', '.join(missing)}")
    return "\n".join(lines) + "\n"


def program_source(folder: str | Path, program: SuiteProgram, scale: str) -> str:
    """The program's source at ``scale``: ``gpu`` (published sizes) or ``cpu``."""
    if scale not in ("gpu", "cpu"):
        raise ValueError(f"scale must be gpu or cpu, got {scale!r}")
    source = (Path(folder) / program.file).read_text()
    return sized_source(source, program.cpu) if scale == "cpu" else source


def _nbytes(values) -> int:
    import torch

    if isinstance(values, torch.Tensor):
        return values.numel() * values.element_size()
    if isinstance(values, (list, tuple)):
        return sum(_nbytes(v) for v in values)
    return 0


def program_cost(source: str) -> dict:
    """Heavy-op FLOPs and minimum bytes of a program at its sizes, on the meta device (nothing
    is computed): ``{"flops", "min_bytes", "output_bytes", "parameters"}``."""
    import torch
    from torch.utils.flop_counter import FlopCounterMode

    module = load_program(source, "suite_program")
    with TORCH_STATE_LOCK, torch.device("meta"):
        torch.manual_seed(0)
        model = module.Model(*module.get_init_inputs())
        inputs = module.get_inputs()
        counter = FlopCounterMode(display=False)
        with counter, torch.no_grad():
            outputs = model(*inputs)
    weights = sum(_nbytes(t) for t in list(model.parameters()) + list(model.buffers()))
    output_bytes = _nbytes(outputs)
    return {
        "flops": int(counter.get_total_flops()),
        "min_bytes": _nbytes(inputs) + weights + output_bytes,
        "output_bytes": output_bytes,
        "parameters": sum(p.numel() for p in model.parameters()),
    }


def check_program(folder: str | Path, program: SuiteProgram) -> dict:
    """Run the CPU variant once (seeded) and cost the published size; a row of facts, with
    ``error`` set when either fails."""
    import torch

    row: dict = {"name": program.name, "family": program.family}
    try:
        row.update(program_cost(program_source(folder, program, "gpu")))
        module = load_program(program_source(folder, program, "cpu"), "suite_program_cpu")
        with TORCH_STATE_LOCK:
            torch.manual_seed(0)
            model = module.Model(*module.get_init_inputs())
            torch.manual_seed(1)
            inputs = module.get_inputs()
        start = time.perf_counter()
        with torch.no_grad():
            out = model(*inputs)
        row["cpu_forward_s"] = round(time.perf_counter() - start, 4)
        row["cpu_output_bytes"] = _nbytes(out)
    except Exception as exc:  # noqa: BLE001 - reported per program
        row["error"] = f"{type(exc).__name__}: {exc}"[:300]
    return row


def main(argv: list[str] | None = None) -> int:
    import argparse

    parser = argparse.ArgumentParser(description="Check a suite's programs (CPU run, GPU cost).")
    parser.add_argument("command", choices=["check"])
    parser.add_argument("folder")
    parser.add_argument("--part", help="a manifest other than suite.json (e.g. parts/x.json)")
    args = parser.parse_args(argv)
    programs = load_suite(args.folder, Path(args.folder) / args.part if args.part else None)
    failures = 0
    for program in programs:
        row = check_program(args.folder, program)
        failures += "error" in row
        print(json.dumps(row), flush=True)
    print(f"{len(programs) - failures}/{len(programs)} programs ok", file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    raise SystemExit(main())
