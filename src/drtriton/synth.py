"""CSP-DAG synthesis: valid, difficulty-controlled PyTorch programs from the operator catalogue.

A program of level L has exactly L operators. Level 1 sweeps the 61 catalogue operators, level 2
sweeps all 61*61 ordered pairs, higher levels draw operators uniformly and independently. Operators
are placed in order; each takes its inputs uniformly at random from the pool of tensors nothing has
consumed yet (fresh ``torch.randn`` inputs when the pool is short), and every tensor left unconsumed
is an output. The shapes are integer variables of one CP-SAT model (OR-Tools): operator shape rules,
per-tensor element bounds, a FLOP band (its lower end halved until feasible) and a memory cap. The
solver takes the first feasible solution of a fixed search that picks values at random
(``SELECT_RANDOM_HALF``), seeded from the program's seed, so different seeds give different shapes
and the same seed gives the same bytes.

Programs are then run (small scale, or any scale on a GPU) and kept only if their outputs are finite,
not constant and depend on every input; a rejected draw is replaced by the next attempt.

Run: ``drtriton synth --level 5 --num 100 --scale small --out programs.jsonl``.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path

from ortools.sat.python import cp_model

from drtriton.ops import OPS, SCALES, Applied, ShapeBuilder, TensorVar, get_op

MAX_LEVEL = 64
OPS_REDRAW_EVERY = 10  # failed draws before a drawn level (>= 3) picks new operators


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


# ----------------------------------------------------------------------------- operator choice
def level_ops(level: int, index: int, rng: random.Random) -> list[str]:
    """The operators of program ``index``: sweeps at levels 1 and 2, uniform draws above."""
    n = len(OPS)
    if level == 1:
        return [OPS[index % n].name]
    if level == 2:
        pair = index % (n * n)
        return [OPS[pair // n].name, OPS[pair % n].name]
    return [rng.choice(OPS).name for _ in range(level)]


# ----------------------------------------------------------------------------- the DAG
@dataclass
class _Arg:
    """A tensor fed to an operator, with the glue (reshape, cast) that adapts it."""

    source: TensorVar
    reshaped: TensorVar | None = None
    cast: bool = False

    @property
    def tensor(self) -> TensorVar:
        return self.reshaped or self.source


@dataclass
class _Node:
    op: str
    args: list[_Arg]
    applied: Applied


def _adapt(sb: ShapeBuilder, t: TensorVar, ranks: Sequence[int], rank: int | None) -> _Arg:
    """Reshape ``t`` to an accepted rank (a view) and cast integer tensors to float."""
    arg = _Arg(t, cast=t.dtype != "float32")
    target = rank if rank is not None else (t.rank if t.rank in ranks else sb.rng.choice(ranks))
    if target != t.rank:
        dims = [sb.dim() for _ in range(target)]
        arg.reshaped = sb.tensor(dims, view=True)
        sb.model.add(arg.reshaped.numel == t.numel)
    return arg


def _place(
    sb: ShapeBuilder, op_names: Sequence[str], fresh_rate: float = 0.0
) -> tuple[list[TensorVar], list[_Node], list[TensorVar]]:
    """Place the operators in order; return (program inputs, nodes, outputs).

    ``fresh_rate``: the chance that an operator input is a fresh program input even when the
    pool has a tensor to offer (0 is the plain CSP-DAG rule).
    """
    rng = sb.rng
    pool: list[TensorVar] = []
    inputs: list[TensorVar] = []
    nodes: list[_Node] = []
    for name in op_names:
        op = get_op(name)
        wanted = (
            op.arity if not fresh_rate else sum(rng.random() >= fresh_rate for _ in range(op.arity))
        )
        taken = [pool.pop(rng.randrange(len(pool))) for _ in range(min(wanted, len(pool)))]
        rank = None
        if op.same_rank:
            first = taken[0].rank if taken else None
            rank = first if first in op.ranks else rng.choice(op.ranks)
        slots: list[TensorVar | None] = [*taken, *([None] * (op.arity - len(taken)))]
        rng.shuffle(slots)
        args = []
        for t in slots:
            if t is None:
                t = sb.fresh(rank if rank is not None else rng.choice(op.ranks))
                inputs.append(t)
            args.append(_adapt(sb, t, op.ranks, rank))
        applied = op.build(sb, [a.tensor for a in args])
        inputs.extend(applied.weights)
        nodes.append(_Node(name, args, applied))
        pool.append(applied.output)
    return inputs, nodes, pool


# ----------------------------------------------------------------------------- solve and render
@dataclass(frozen=True)
class _Draft:
    ops: list[str]
    source: str
    flops: int
    total_numel: int
    input_shapes: list[list[int]]
    output_shapes: list[list[int]]
    output_dtypes: list[str]


def draw_program(
    op_names: Sequence[str],
    scale: str,
    rng: random.Random,
    budget: float = 2.0,
    halvings: int = 0,
    fresh_rate: float = 0.0,
) -> _Draft | str:
    """Build and solve one CP-SAT model for these operators.

    Returns the draft, or "infeasible" (proven) or "timeout" (budget spent). ``halvings`` starts
    the FLOP floor that many halvings down, for when earlier draws timed out above it.
    """
    limits = SCALES[scale]
    model = cp_model.CpModel()
    sb = ShapeBuilder(model, limits, rng)
    inputs, nodes, outputs = _place(sb, op_names, fresh_rate)

    flops = model.new_int_var(0, limits.flops_hi, "flops")
    model.add(flops == sum(n.applied.flops for n in nodes))
    total = model.new_int_var(0, limits.max_total_numel, "total_numel")
    model.add(total == sum(t.numel for t in sb.tensors))
    # The FLOP band's lower end, halved step by step until feasible: the search tries the
    # smallest relaxation first, so the first solution found uses the least relaxation possible.
    floors = [limits.flops_lo >> j for j in range(halvings, limits.flops_lo.bit_length())] + [0]
    relax = model.new_int_var(0, len(floors) - 1, "relax")
    floor = model.new_int_var(0, limits.flops_lo, "floor")
    model.add_element(relax, floors, floor)
    model.add(flops >= floor)

    # Branch on the relaxation first (least relaxed first), then on sizes in program order
    # (measured: far fewer conflicts than a shuffled order) with random value selection.
    model.add_decision_strategy([relax], cp_model.CHOOSE_FIRST, cp_model.SELECT_MIN_VALUE)
    model.add_decision_strategy(
        sb.decision_vars, cp_model.CHOOSE_FIRST, cp_model.SELECT_RANDOM_HALF
    )

    solver = cp_model.CpSolver()
    params = solver.parameters
    params.num_workers = 1
    params.search_branching = cp_model.FIXED_SEARCH
    params.random_seed = rng.randrange(2**31)
    params.max_deterministic_time = budget  # deterministic, so results do not depend on the machine
    # Presolve would otherwise fix ``relax`` to its loosest value by dual reasoning (a lower
    # floor never hurts feasibility), silently dropping the FLOP band.
    params.keep_all_feasible_solutions_in_presolve = True
    status = solver.solve(model)
    if status not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        return "infeasible" if status == cp_model.INFEASIBLE else "timeout"
    return _render(
        solver, op_names, inputs, nodes, outputs, solver.value(flops), solver.value(total)
    )


def _render(solver, op_names, inputs, nodes, outputs, flops, total) -> _Draft:
    def value(d) -> int:
        return d if isinstance(d, int) else int(solver.value(d))

    def shape(t: TensorVar) -> list[int]:
        return [value(d) for d in t.dims]

    for i, t in enumerate(inputs):
        t.name = f"x{i}"
    for i, node in enumerate(nodes):
        node.applied.output.name = f"t{i}"

    def arg_text(a: _Arg) -> str:
        text = a.source.name
        if a.cast:
            text += ".float()"
        if a.reshaped is not None:
            text += f".reshape({', '.join(map(str, shape(a.reshaped)))})"
        return text

    body = []
    for node in nodes:
        args = [arg_text(a) for a in node.args] + [w.name for w in node.applied.weights]
        body.append(f"        {node.applied.output.name} = {node.applied.render(value, args)}")
    names = ", ".join(t.name for t in inputs)
    shapes = [shape(t) for t in inputs]
    randn = ",\n        ".join(f"torch.randn({', '.join(map(str, s))})" for s in shapes)
    source = _TEMPLATE.format(
        level=len(op_names),
        ops=", ".join(op_names),
        args=names,
        body="\n".join(body),
        ret=", ".join(t.name for t in outputs),
        inputs=randn,
    )
    return _Draft(
        ops=list(op_names),
        source=source,
        flops=flops,
        total_numel=total,
        input_shapes=shapes,
        output_shapes=[shape(t) for t in outputs],
        output_dtypes=[t.dtype for t in outputs],
    )


_TEMPLATE = '''import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """Synthetic level-{level} program: {ops}."""

    def __init__(self):
        super().__init__()

    def forward(self, {args}):
{body}
        return {ret}


def get_inputs():
    return [
        {inputs},
    ]


def get_init_inputs():
    return []
'''


# ----------------------------------------------------------------------------- quality filters
def check_program(
    draft: _Draft | SynthProgram, mode: str, device: str = "cpu", seed: int = 0
) -> str | None:
    """Why the program must be rejected, or None if it passes. Mode: run, meta or none."""
    if mode == "none":
        return None
    import torch

    from drtriton.program import as_output_tuple, load_program

    module = load_program(draft.source, "synth")
    try:
        if mode == "meta":
            with torch.device("meta"):
                outputs = as_output_tuple(module.Model()(*module.get_inputs()))
        else:
            runs = _Runs(module, device, seed)
            outputs = runs.outputs
    except Exception as exc:  # a shape rule the catalogue got wrong: report, never hide
        return f"error:{type(exc).__name__}: {str(exc)[:200]}"
    if [list(o.shape) for o in outputs] != draft.output_shapes:
        return "shape_mismatch"
    if [str(o.dtype).removeprefix("torch.") for o in outputs] != draft.output_dtypes:
        return "dtype_mismatch"
    if mode == "meta":
        return None
    if not all(torch.isfinite(o).all() for o in outputs if o.is_floating_point()):
        return "nonfinite"
    if any(bool((o == o.flatten()[0]).all()) for o in outputs):
        return "constant_output"
    return runs.unused_input() or runs.ill_conditioned()


class _Runs:
    """A program run on seeded inputs, with the follow-up runs the filters need."""

    def __init__(self, module, device: str, seed: int) -> None:
        import torch

        self.generator = torch.Generator(device=device).manual_seed(seed)
        self.shapes = [tuple(x.shape) for x in module.get_inputs()]
        self.device = device
        self.inputs = [self._randn(s) for s in self.shapes]
        self.model = module.Model().to(device)
        self.outputs = self.run(self.inputs)

    def _randn(self, shape):
        import torch

        return torch.randn(shape, generator=self.generator, device=self.device)

    def run(self, inputs):
        import torch

        from drtriton.program import as_output_tuple

        with torch.no_grad():
            return as_output_tuple(self.model(*inputs))

    def unused_input(self) -> str | None:
        """Reject a program with an input that changes no output."""
        import torch

        for i, shape in enumerate(self.shapes):
            changed = list(self.inputs)
            changed[i] = self._randn(shape)
            again = self.run(changed)
            if all(torch.equal(a, b) for a, b in zip(self.outputs, again, strict=True)):
                return "unused_input"
        return None

    def ill_conditioned(self) -> str | None:
        """Reject a program whose float32 result is not its float64 result (e.g. argmax ties).

        A candidate cannot be expected to reproduce rounding accidents: where float32 and float64
        disagree beyond a tenth of the judge's tolerance, the reference itself is unreliable.
        Programs that cast explicitly to float32 are compared with a run on inputs perturbed by
        one part in a million instead.
        """
        import torch

        try:
            exact = self.run([x.double() for x in self.inputs])
        except RuntimeError:  # an explicit .float() cast meets a float64 tensor: perturb instead
            exact = self.run([x * (1 + 1e-6 * self._randn(x.shape)) for x in self.inputs])
            exact = [o.double() if o.is_floating_point() else o for o in exact]
        for out32, out64 in zip(self.outputs, exact, strict=True):
            if out32.is_floating_point():
                ok = torch.allclose(out32.double(), out64.double(), atol=1e-3, rtol=1e-3)
            else:
                ok = torch.equal(out32, out64)
            if not ok:
                return "ill_conditioned"
        return None


# ----------------------------------------------------------------------------- driver
def program_rng(config: SynthConfig, index: int, attempt: int) -> random.Random:
    """The seeded generator of one draw: a pure function of (seed, level, scale, index, attempt)."""
    return random.Random(
        f"drtriton-synth:{config.seed}:{config.level}:{config.scale}:{index}:{attempt}"
    )


def synthesize_one(config: SynthConfig, index: int) -> SynthResult:
    """Program ``index`` of the run: the first draw that solves and passes the filters."""
    rejected: Counter[str] = Counter()
    mode = config.check_mode()
    halvings = 0
    for attempt in range(config.max_attempts):
        if attempt % OPS_REDRAW_EVERY == 0:
            # Sweep levels keep their operators; drawn levels redraw them now and then, since
            # some sequences are degenerate whatever the shapes (LogSigmoid then ReLU is zero).
            op_names = level_ops(config.level, index, program_rng(config, index, -1 - attempt))
        rng = program_rng(config, index, attempt)
        # A sweep must reach every operator sequence, but some chains are degenerate whatever
        # the shapes (ReLU of LogSigmoid is zero): after the first redraw period, sweep levels
        # let operators take fresh inputs instead of their predecessors' outputs.
        fresh_rate = 0.5 if config.level <= 2 and attempt >= OPS_REDRAW_EVERY else 0.0
        draft = draw_program(op_names, config.scale, rng, config.budget(), halvings, fresh_rate)
        # A timeout usually means the FLOP floor is out of reach but not provably so: the next
        # draw starts one halving lower (the published generator's relaxation, made persistent).
        halvings += draft == "timeout"
        reason = draft if isinstance(draft, str) else check_program(draft, mode, config.device)
        if reason is None:
            program = SynthProgram(
                id=hashlib.sha256(draft.source.encode()).hexdigest()[:16],
                level=config.level,
                index=index,
                seed=config.seed,
                scale=config.scale,
                attempts=attempt + 1,
                checked=mode,
                **asdict(draft),
            )
            return SynthResult(program, dict(rejected))
        rejected[reason.split(": ", 1)[0]] += 1  # counted by kind (errors without their message)
    raise SynthError(
        f"program {index} ({', '.join(op_names)}): no valid draw in {config.max_attempts} "
        f"attempts; rejections: {dict(rejected)}"
    )


def _worker_init() -> None:
    import torch

    torch.set_num_threads(1)  # workers are the parallelism; intra-op threads would oversubscribe


def _one(args: tuple[SynthConfig, int]) -> SynthResult:
    return synthesize_one(*args)


def iter_synthesize(config: SynthConfig) -> Iterator[SynthResult]:
    """Yield the run's programs in index order (the same output whatever the worker count)."""
    config.validate()
    indices = range(config.start_index, config.start_index + config.num)
    if config.workers == 1:
        for i in indices:
            yield synthesize_one(config, i)
        return
    import multiprocessing

    ctx = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(config.workers, mp_context=ctx, initializer=_worker_init) as pool:
        yield from pool.map(_one, [(config, i) for i in indices], chunksize=4)


def synthesize(
    config: SynthConfig, on_result: Callable[[SynthResult], None] | None = None
) -> list[SynthProgram]:
    """Run a whole synthesis; ``on_result`` sees each result as it arrives (progress, saving)."""
    programs = []
    for result in iter_synthesize(config):
        if on_result is not None:
            on_result(result)
        programs.append(result.program)
    return programs


def write_jsonl(programs: Sequence[SynthProgram], path: str | os.PathLike) -> None:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w") as f:
        for p in programs:
            f.write(p.to_json() + "\n")


def read_jsonl(path: str | os.PathLike) -> list[SynthProgram]:
    with Path(path).open() as f:
        return [SynthProgram.from_dict(json.loads(line)) for line in f if line.strip()]
