"""Shape building blocks of the catalogue: scales, tensors as CP-SAT dimension variables, and
``OpSpec``, one operator's description (see ``drtriton.ops``)."""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from ortools.sat.python import cp_model

from drtriton.ops.scales import SCALES, ScaleLimits  # noqa: F401  (re-exported)

Dim = cp_model.IntVar | int
Value = Callable[[Dim], int]  # resolves a dimension variable (or constant) to its solved integer


@dataclass
class TensorVar:
    """A tensor while a program's model is being built: its dims are CP-SAT variables."""

    dims: list[Dim]
    numel: cp_model.IntVar
    dtype: str = "float32"
    name: str = ""

    @property
    def rank(self) -> int:
        return len(self.dims)


@dataclass
class Applied:
    """One operator placed in a program: its output, the extra inputs it created, its FLOPs."""

    output: TensorVar
    render: Callable[[Value, Sequence[str]], str]  # (value, argument expressions) -> call text
    flops: cp_model.LinearExprT
    weights: list[TensorVar] = field(default_factory=list)  # fresh program inputs (conv weights)


class ShapeBuilder:
    """Creates the CP-SAT variables of one program and remembers which ones to branch on."""

    def __init__(self, model: cp_model.CpModel, limits: ScaleLimits, rng: random.Random):
        self.model = model
        self.limits = limits
        self.rng = rng
        self.decision_vars: list[cp_model.IntVar] = []
        self.tensors: list[TensorVar] = []

    def var(self, lo: int, hi: int, decide: bool = True) -> cp_model.IntVar:
        v = self.model.new_int_var(lo, hi, "")
        if decide:
            self.decision_vars.append(v)
        return v

    def dim(self, lo: int = 1) -> cp_model.IntVar:
        return self.var(lo, self.limits.max_dim)

    def product(self, factors: Sequence[Dim], hi: int) -> Dim:
        """A variable equal to the product of ``factors`` (all >= 1), each partial product <= hi."""
        constant = 1
        acc: Dim | None = None
        for f in factors:
            if isinstance(f, int):
                constant *= f
                continue
            if acc is None:
                acc = f
                continue
            nxt = self.var(1, hi, decide=False)
            self.model.add_multiplication_equality(nxt, [acc, f])
            acc = nxt
        if acc is None:
            return constant
        if constant == 1:
            return acc
        scaled = self.var(1, hi, decide=False)
        self.model.add(scaled == constant * acc)
        return scaled

    def tensor(self, dims: Sequence[Dim], dtype: str = "float32", view: bool = False) -> TensorVar:
        """A tensor with the element-count bounds of the scale; views do not count as memory."""
        lim = self.limits
        prod = self.product(dims, lim.max_numel)
        numel = self.var(lim.min_numel, lim.max_numel, decide=False)
        self.model.add(numel == prod)
        t = TensorVar(list(dims), numel, dtype)
        if not view:
            self.tensors.append(t)
        return t

    def fresh(self, rank: int) -> TensorVar:
        return self.tensor([self.dim() for _ in range(rank)])

    def attr(self, lo: int, hi: int) -> cp_model.IntVar:
        return self.var(lo, max(lo, hi))


@dataclass(frozen=True)
class OpSpec:
    """One catalogue operator."""

    name: str
    category: str
    arity: int  # data inputs taken from the program's tensor pool
    ranks: tuple[int, ...]  # ranks each data input may have
    same_rank: bool  # all data inputs must share one rank
    torch_fn: str  # the PyTorch function it is written with
    flops_per_element: int  # for elementwise-like ops (0 where the op has its own model)
    build: Callable[[ShapeBuilder, list[TensorVar]], Applied]


ALL_RANKS = (1, 2, 3, 4, 5)
