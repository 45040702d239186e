"""One draw: the operators of a level, the DAG that places them, its CP-SAT shapes, the source."""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass

from ortools.sat.python import cp_model

from drtriton.ops import OPS, SCALES, Applied, ShapeBuilder, TensorVar, get_op


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
