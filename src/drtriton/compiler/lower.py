"""Lower a captured fx graph to Triton kernels and the body of ``ModelNew.forward``.

Walk the graph in order; each node becomes a value: an ``ir.Expr`` for tensors (lazy: pointwise
ops and views only build expressions), a Python value for shapes and scalars. Kernels come from
three places:

* a non-pointwise op (reduction, softmax, norm, scan, matmul, conv, pool) makes a kernel that
  reads its inputs *through* their lazy expressions (fused prologue);
* a lazy expression is *materialised* when it is a graph output, has several users, or grows too
  large; if it reads exactly the output of a still-pending kernel at the same index (e.g. bias +
  activation after a matmul), it becomes that kernel's fused epilogue instead of a new kernel;
* kernels stay pending until something reads their buffer, so unused results are never computed.

Every node's shape and dtype are checked against shape propagation; a mismatch or an unknown
operator raises ``UnsupportedOperatorError`` naming the operator and the source line.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
import operator
import re
from collections.abc import Callable
from dataclasses import dataclass, field

import torch
import torch.fx as fx
import torch.nn.functional as F

from drtriton.compiler import ir, kernels
from drtriton.compiler.capture import AUGMENTED, Captured, attribute_name, node_line
from drtriton.compiler.config import CompilerConfig, Unsupported, UnsupportedOperatorError
from drtriton.compiler.reduction_plan import Reductions, RowReduction
from drtriton.compiler.tune import Tuning


@dataclass
class Pending:
    make: Callable[[kernels.Writer, str], kernels.Kernel]  # template call, given writer and out
    shape: ir.Shape
    dtype: torch.dtype
    labels: list[str]
    epi: kernels.Epilogue | None = None
    base: str = ""  # the producer's own output name (the epilogue's hole)
    rows: RowReduction | None = None  # a plain one-kernel reduction: what it reduces
    full: RowReduction | None = None  # a one-kernel softmax or log_softmax: what it normalises
    unfolded: ir.Expr | None = None  # ``full`` as an expression over its rows' statistics


@dataclass
class Missing:
    """A result the compiler does not produce (e.g. cummax indices); using it is unsupported."""

    what: str


def unavailable(what: str) -> None:
    """A graph node standing for a result the compiler does not produce (the statistics a fused
    ATen norm also returns): its lowering is ``Missing(what)``, so only using it is refused."""
    raise RuntimeError(f"{what} is not computed")


class Deferred:
    """A result lowered only when something uses it (multi-head attention's weights, which a
    forward mostly drops): taking it out of a tuple does not count as a use."""

    def __init__(self, make, needs: tuple = ()) -> None:
        self.make, self.value, self.done = make, None, False
        self.needs = needs  # the expressions it reads: live while it is not lowered

    def force(self):
        if not self.done:
            self.value, self.done = self.make(), True
        return self.value


def _forced(v):
    return v.force() if isinstance(v, Deferred) else v


@dataclass(frozen=True)
class Product:
    """A matrix product or convolution: what a library sees (kind, shapes, layouts, dtypes,
    settings) and its floating-point operations."""

    signature: str
    flops: float


@dataclass
class Program:
    kernels: list[kernels.Kernel] = field(default_factory=list)
    body: list[str] = field(default_factory=list)
    input_names: list[str] = field(default_factory=list)
    init_lines: list[str] = field(default_factory=list)  # appended to ModelNew.__init__
    # every matrix product and convolution, in lowering order (``Lowering.vendor_product``)
    products: list[Product] = field(default_factory=list)


def _arg(args, kwargs, i: int, name: str, default=None):
    if len(args) > i:
        return args[i]
    return kwargs.get(name, default)


def _tuple(v, n: int) -> tuple[int, ...]:
    if isinstance(v, list | tuple):
        return tuple(int(x) for x in v) if len(v) == n else tuple(int(v[0]) for _ in range(n))
    return tuple(int(v) for _ in range(n))


def _label(node: fx.Node, gm: fx.GraphModule) -> str:
    if node.op == "call_module":
        return f"nn.{type(gm.get_submodule(node.target)).__name__}"
    if node.op == "call_method":
        return f".{node.target}()"
    t = node.target
    if isinstance(t, torch._ops.OpOverload):  # an ATen op the export capture could not map
        return f"aten.{t._opname}"
    if t is getattr and len(node.args) > 1:
        return f".{node.args[1]}"
    mod = getattr(t, "__module__", "") or ""
    name = getattr(t, "__name__", str(t))
    if mod.startswith("torch.nn.functional"):
        return f"F.{name}"
    home = mod.rsplit(".", 1)[-1].lstrip("_")  # torch._C._special's special_i0: special.i0
    if mod.startswith("torch") and home in ("special", "linalg", "fft") and name.startswith(
            f"{home}_"):
        return f"torch.{home}.{name[len(home) + 1:]}"
    if mod.startswith("torch") or mod == "" and hasattr(torch, name):
        return f"torch.{name}"
    return f"{mod.split('.')[-1] or 'builtin'}.{name}"


TRACED_CONSTANT_MAX = 4096  # elements of a traced constant written into forward as a literal


def _attribute_path(model: torch.nn.Module, target: str) -> str:
    """Python for ``self.<target>`` in ``ModelNew`` whatever the names: ``.name`` where it is an
    identifier, ``[i]`` into a ``Sequential`` or ``ModuleList``, else ``getattr`` (a
    ``ModuleDict`` key such as ``"3x3"``, ``"conv-a"``, ``"in"`` or ``"0"``)."""
    path, prefix = "self", []
    for part in target.split("."):
        try:
            parent = model.get_submodule(".".join(prefix))
        except AttributeError:
            parent = None
        if attribute_name(part):
            path += f".{part}"
        elif part.isdigit() and isinstance(parent, torch.nn.Sequential | torch.nn.ModuleList):
            path += f"[{part}]"
        else:
            path = f"getattr({path}, {part!r})"
        prefix.append(part)
    return path


def _traced(model: torch.nn.Module, target: str) -> bool:
    """Whether ``target`` is a tensor the trace made from constants in ``forward``: fx stores
    them on the traced module as ``_tensor_constantN``; the model never registered them."""
    registered = {n for n, _ in model.named_parameters()} | {n for n, _ in model.named_buffers()}
    return target.startswith("_tensor_constant") and target not in registered


class Lowering(Reductions):
    def __init__(self, cap: Captured, config: CompilerConfig, tuning: Tuning | None = None):
        self.cap, self.config = cap, config
        self.tuning = tuning
        self.blocks = kernels.CUDA_BLOCKS if config.device == "cuda" else kernels.CPU_BLOCKS
        if config.device == "cuda" and config.precision == "tf32":
            self.blocks = dataclasses.replace(self.blocks, dot_precision="tf32")
        self.prog = Program()
        self.env: dict[fx.Node, object] = {}
        self.labels: dict[fx.Node, list[str]] = {}
        # the result of an in-place op is its first argument's tensor: node -> that tensor's node
        self.same_tensor: dict[fx.Node, fx.Node] = {}
        self.pending: dict[str, Pending] = {}
        self.emitted: set[str] = set()
        self.twins: dict[tuple, list[kernels.Kernel]] = {}  # kernels by _identity
        # every launch: (its line in the body, the kernel it launches under its own buffers)
        self.launches: list[tuple[int, kernels.Kernel]] = []
        self.shapes: dict[str, tuple[ir.Shape, torch.dtype]] = {}
        self.params: dict[str, str] = {}
        self.complex_vars: set[str] = set()  # parameters read through torch.view_as_real
        self._reads_cache: dict[str, frozenset[str]] = {}
        self.nodes = list(cap.gm.graph.nodes)
        self.pos = {n: i for i, n in enumerate(self.nodes)}
        self.cur = 0
        self.cur_labels: list[str] = []
        self.cur_args: list[ir.Expr] = []  # tensor args of the node being lowered
        self.extra_live: list[ir.Expr] = []  # other outputs, while lowering the output node
        self.counter = 0

    # ------------------------------------------------------------ driver
    def run(self) -> Program:
        for node in self.nodes:
            self.cur = self.pos[node]
            try:
                self.env[node] = self.lower_node(node)
            except Unsupported as exc:
                line, text = node_line(node, self.cap.lines)
                raise UnsupportedOperatorError(
                    _label(node, self.cap.gm), line, text, str(exc)
                ) from exc
            except UnsupportedOperatorError:
                raise
            except Exception as exc:  # a lowering bug must never produce a program
                line, text = node_line(node, self.cap.lines)
                raise UnsupportedOperatorError(
                    _label(node, self.cap.gm), line, text, f"internal: {type(exc).__name__}: {exc}"
                ) from exc
        self._fit_tuning_budget()
        return self.prog

    def lower_node(self, node: fx.Node):
        if node.op == "placeholder":
            return self.placeholder(node)
        if node.op == "output":
            return self.output(node)
        args = fx.node.map_arg(node.args, lambda n: self.env[n])
        kwargs = fx.node.map_arg(node.kwargs, lambda n: self.env[n])
        if node.target is not operator.getitem:  # a deferred result used: lowered now
            args = tuple(_forced(a) for a in args)
            kwargs = {k: _forced(v) for k, v in kwargs.items()}
        elif args and isinstance(args[0], Deferred):  # indexed itself, not taken from a tuple
            args = (args[0].force(), *args[1:])
        for v in _flat(args, kwargs):
            if isinstance(v, Missing):
                raise Unsupported(f"uses {v.what}")
        self.cur_args = [v for v in _flat(args, kwargs, deep=True) if isinstance(v, ir.Expr)]
        self.cur_labels = []
        for m in node.all_input_nodes:  # lazy inputs fuse into whatever consumes this node
            if not isinstance(self.env.get(m), ir.Load | ir.Const):
                self.cur_labels += [x for x in self.labels.get(m, []) if x not in self.cur_labels]
        own = _label(node, self.cap.gm)
        if node.op != "get_attr" and own not in self.cur_labels:
            self.cur_labels.append(own)
        if any(isinstance(v, Complex) for v in _flat(args, kwargs)):
            self.labels[node] = self.cur_labels
            return self.complex_call(node, args, kwargs)
        mutated = self.check_inplace(node)
        value = self.param(node.target) if node.op == "get_attr" else self.dispatch(
            node, args, kwargs)
        value = self.check(node, value)
        if mutated is not None:  # every name of the tensor reads the update
            self.env[mutated] = value
            for name, tensor in self.same_tensor.items():
                if tensor is mutated and name is not node:
                    self.env[name] = value
        self.labels[node] = self.cur_labels
        if isinstance(value, ir.Expr) and not ir.is_cheap(value):
            if len(node.users) > 1 or ir.count_nodes(value) > self.config.max_fused_nodes:
                value = self.materialize(value)
                self.labels[node] = []
        return value

    def dispatch(self, node: fx.Node, args, kwargs):
        """The lowering of ``node``'s call on lowered ``args``."""
        if node.op == "call_module":
            return self.call_module(node, args, kwargs)
        if node.op == "call_method":
            return self.call_method(node.target, args, kwargs)
        return self.call_function(node.target, args, kwargs)

    def complex_call(self, node: fx.Node, args, kwargs):
        """A call with a complex argument (see ``Complex``)."""
        if node.op == "call_function" and node.target in COMPLEX_TAKERS:
            return self.call_function(node.target, args, kwargs)
        if node.target is getattr and args[1] in ("real", "imag"):
            return args[0].re if args[1] == "real" else args[0].im
        op = COMPLEX_ARITHMETIC.get(node.target)
        if op is not None and not kwargs and len(args) == 2:
            a, b = (v if isinstance(v, Complex) else Complex(self.t(v), ir.const(0.0))
                    for v in args)
            if op != "mul":
                return Complex(ir.op(op, a.re, b.re), ir.op(op, a.im, b.im))
            return Complex(ir.op("sub", ir.op("mul", a.re, b.re), ir.op("mul", a.im, b.im)),
                           ir.op("add", ir.op("mul", a.re, b.im), ir.op("mul", a.im, b.re)))
        if node.target in ("contiguous", "detach", "clone", torch.clone):
            return args[0]
        if _is_view(node):
            re = self.dispatch(node, _part(args, "re"), _part(kwargs, "re"))
            im = self.dispatch(node, _part(args, "im"), _part(kwargs, "im"))
            if isinstance(re, tuple | list):
                return type(re)(Complex(a, b) for a, b in zip(re, im, strict=True))
            return Complex(re, im)
        raise Unsupported("a complex tensor (views, +, -, * and view_as_real take them)")

    def check_inplace(self, node: fx.Node) -> fx.Node | None:
        """An in-place op is lowered functionally, then the mutated tensor is rebound to the
        result (later readers see the update, through the tensor's node and through the results
        of earlier in-place ops on it, as in ``y.mul_(a).add_(b)``). Refused where the tensor
        aliases another one. Returns the tensor's node to rebind, if any."""
        augmented = node.meta.get(AUGMENTED, False)
        inplace = augmented or node.kwargs.get("inplace") is True
        if node.op == "call_module":
            inplace = inplace or getattr(self.cap.gm.get_submodule(node.target), "inplace", False)
        elif node.op == "call_method":
            inplace = inplace or (node.target.endswith("_") and not node.target.startswith("_"))
        elif node.op == "call_function":
            inplace = inplace or node.target in INPLACE_FUNCTIONS or node.target in (
                operator.iadd, operator.isub, operator.imul, operator.itruediv)
        first = node.args[0] if node.args else None
        if not inplace or not isinstance(first, fx.Node):
            return None
        if isinstance(self.env.get(first), bool | int | float):
            return None  # a number: Python rebinds the one name, as the trace did
        first = self.same_tensor.get(first, first)
        if augmented and not self._read_later(node, first):
            return None  # no other name reads the tensor again: in place or not is the same
        self.same_tensor[node] = first
        aliases = [first] + [u for u in first.users if u is not node and _is_view(u)]
        if _is_view(first) or len(aliases) > 1:
            raise Unsupported("in-place update of a view (aliasing is not modelled)")
        return first

    def _read_later(self, node: fx.Node, tensor: fx.Node) -> bool:
        """Whether ``tensor``, a name given to it by an earlier in-place call, or a tensor it is
        a view of is read after ``node``."""
        names = [tensor] + [n for n, t in self.same_tensor.items() if t is tensor]
        while names:
            name = names.pop()
            if any(self.pos[u] > self.pos[node] for u in name.users):
                return True
            if _is_view(name) and name.args and isinstance(name.args[0], fx.Node):
                names.append(name.args[0])
        return False

    def check(self, node: fx.Node, value):
        meta = node.meta.get("tensor_meta")
        if isinstance(value, ir.Expr) and meta is not None and hasattr(meta, "shape"):
            if isinstance(value, ir.Const) and not value.shape:  # a scalar expanded: uniform
                value = ir.Const(tuple(meta.shape), value.dtype, value.value)
            if tuple(meta.shape) != value.shape:
                raise Unsupported(f"internal shape mismatch {value.shape} vs {tuple(meta.shape)}")
            if meta.dtype != value.dtype:
                value = ir.cast(value, meta.dtype)
        return value

    # ------------------------------------------------------------ buffers and kernels
    def new_buf(self, prefix: str = "buf") -> str:
        self.counter += 1
        return f"{prefix}{self.counter}"

    def placeholder(self, node: fx.Node) -> ir.Expr:
        name = node.target
        self.prog.input_names.append(name)
        meta = node.meta.get("tensor_meta")
        if (meta is None or not hasattr(meta, "shape")) and not node.users:
            return None  # a Python scalar the trace was specialised to (capture._scalar_inputs)
        if meta is None or not hasattr(meta, "shape"):
            raise UnsupportedOperatorError(f"input {name}", 0, "", "non-tensor forward inputs")
        shape = tuple(meta.shape)
        self.prog.body.append(f"{name} = {name}.contiguous()")
        self.shapes[name] = (shape, meta.dtype)
        self.emitted.add(name)
        return ir.Load(shape, meta.dtype, name, ir.contiguous_strides(shape), 0)

    def _param_var(self, target: str) -> str:
        """The local name ``ModelNew.forward`` gives a parameter: its path as an identifier,
        numbered where two paths give one name (``conv-a`` and ``conv_a``)."""
        base = "p_" + re.sub(r"\W", "_", target)
        taken = set(self.params.values())
        names = (f"{base}{n or ''}" for n in itertools.count())
        return next(name for name in names if name not in taken)

    def param(self, target: str) -> ir.Expr:
        if target in self.params:
            var = self.params[target]
        else:
            try:
                t = self.cap.gm.get_parameter(target)
            except AttributeError:
                try:
                    t = self.cap.gm.get_buffer(target)
                except AttributeError as exc:
                    raise Unsupported(
                        f"tensor attribute {target} is not a parameter or buffer"
                    ) from exc
            if _traced(self.cap.model, target):
                return self._traced_constant(target, t)
            var = self._param_var(target)
            path = _attribute_path(self.cap.model, target)
            if t.is_complex():  # read as (real, imaginary) pairs along a last dim of 2
                self.prog.body.append(f"{var} = torch.view_as_real({path}).contiguous()")
                self.shapes[var] = (tuple(t.shape) + (2,), t.real.dtype)
                self.complex_vars.add(var)
            else:
                self.prog.body.append(f"{var} = {path}.contiguous()")
                self.shapes[var] = (tuple(t.shape), t.dtype)
            self.params[target] = var
            self.emitted.add(var)
        shape, dtype = self.shapes[var]
        load = ir.Load(shape, dtype, var, ir.contiguous_strides(shape), 0)
        if var in self.complex_vars:
            return Complex(select_last(load, 0), select_last(load, 1))
        return load

    def _traced_constant(self, target: str, t: torch.Tensor) -> ir.Expr:
        """A tensor the trace made from constants in ``forward`` (``torch.arange(8)``, a literal
        ``torch.tensor``): not an attribute of the model, so ``ModelNew`` has no copy of it. It
        becomes a shaped constant, an ``arange``, or (small ones) a literal in ``forward``; a
        complex one becomes two real ones, its parts."""
        if t.is_complex():
            return Complex(self._traced_constant(f"{target}_re", t.real),
                           self._traced_constant(f"{target}_im", t.imag))
        if t.is_meta:  # traced with shapes alone: its values were never computed
            raise Unsupported(f"tensor constant {target} made in forward from the inputs' "
                              "shapes alone")
        shape, values = tuple(t.shape), t.detach().flatten().tolist()
        if not values:
            raise Unsupported(f"empty tensor constant {target}")
        if all(v == values[0] for v in values):
            return ir.Const(shape, t.dtype, values[0])
        steps = {b - a for a, b in zip(values, values[1:], strict=False)}
        if len(shape) == 1 and len(steps) == 1 and not t.dtype.is_floating_point:
            return ir.arange(len(values), values[0], steps.pop(), t.dtype)
        if len(values) > TRACED_CONSTANT_MAX:
            raise Unsupported(f"tensor constant of {len(values)} elements made in forward")
        var = "c_" + target.replace(".", "_")
        # a buffer made once in __init__: a tensor made in forward would run PyTorch there
        literal = repr(values).replace("inf", 'float("inf")').replace("nan", 'float("nan")')
        self.prog.init_lines.append(f"self.register_buffer({var!r}, torch.tensor({literal}, "
                                    f"dtype={t.dtype}).reshape({shape!r}), persistent=False)")
        self.prog.body.append(f"{var} = self.{var}")
        self.shapes[var] = (shape, t.dtype)
        self.emitted.add(var)
        self.params[target] = var
        return ir.Load(shape, t.dtype, var, ir.contiguous_strides(shape), 0)

    def kernel(self, make, shape: ir.Shape, dtype: torch.dtype,
               rows: RowReduction | None = None, full: RowReduction | None = None) -> ir.Load:
        """Register a pending kernel producing a new contiguous buffer; return its load."""
        buf = self.new_buf()
        self.pending[buf] = Pending(make, tuple(shape), dtype, list(self.cur_labels), None, buf,
                                    rows, full)
        self.shapes[buf] = (tuple(shape), dtype)
        return ir.Load(tuple(shape), dtype, buf, ir.contiguous_strides(tuple(shape)), 0)

    def _wide(self) -> bool:
        """Whether any tensor of the program has 2**31 elements or more."""
        return any(ir.numel(shape) >= 2**31 for shape, _ in self.shapes.values())

    def flush(self, buf: str) -> None:
        """Emit the pending kernel that writes ``buf`` (after whatever it reads)."""
        p = self.pending.pop(buf, None)
        if p is None:
            return
        doc = "Fused: " + ", ".join(p.labels) + "." if p.labels else "Copy (materialise a view)."
        w = kernels.Writer("KERNEL_NAME", doc, self.blocks)
        w.epilogue = p.epi
        k = p.make(w, buf)
        launched = [k.fill, k] if k.fill is not None else [k]
        for b in dict.fromkeys(b for kk in launched for b in kk.buffers):
            if b != buf:
                self.flush(b)
        # A kernel the program already has (the same code at the same size: a repeated layer)
        # is launched again under its name, so it is compiled and tuned once.
        twin = self.twins.setdefault(_identity(launched), launched)
        if twin is launched:  # name kernels in launch order, after their producers
            words = [x.split(".")[-1].strip("()").lower() for x in p.labels][:3] or ["copy"]
            k.name = f"k{len(self.prog.kernels)}_" + "_".join(words)
            if k.fill is not None:
                k.fill.name = k.name + "_fill"
        else:
            for kk, first in zip(launched, twin, strict=True):
                kk.name = first.name
        shape, dtype = self.shapes[buf]
        self.prog.body.append(
            f"{buf} = torch.empty({shape!r}, device=dev, dtype={dtype})")
        for kk in launched:
            if twin is not launched:
                self._apply_tuning(kk)
                self._launch(kk)
                continue
            kk.source = kk.source.replace("KERNEL_NAME", k.name)
            if self._wide():
                # past 2**31 elements int32 index arithmetic wraps: start it in int64
                kk.source = re.sub(
                    r"tl\.program_id\((\d)\)", r"tl.program_id(\1).to(tl.int64)", kk.source
                )
            self._apply_tuning(kk)
            self._launch(kk)
            self.prog.kernels.append(kk)
        self.emitted.add(buf)

    def _launch(self, k: kernels.Kernel) -> None:
        self.launches.append((len(self.prog.body), k))
        self.prog.body.append(k.launch())

    def _fit_tuning_budget(self) -> None:
        """Fix the launches of the kernels past ``max_tuned_configs`` (the least work first) to
        the middle of their space. With a tuning, every kernel it names is fixed already and the
        others were past the budget when it was measured."""
        if not self.blocks.tune:
            return
        open_ = [k for k in self.prog.kernels if k.configs and k.chosen is None]
        if self.tuning is None:
            budget = self.config.max_tuned_configs
            for k in sorted(open_, key=lambda k: -k.work):
                if len(k.configs) <= budget:
                    budget -= len(k.configs)
                    open_.remove(k)
        fixed = {k.name: len(k.configs) // 2 for k in open_}
        for line, k in self.launches:
            if k.name in fixed and k.configs and k.chosen is None:
                k.choose(fixed[k.name], "")
                self.prog.body[line] = k.launch()

    def _apply_tuning(self, k: kernels.Kernel) -> None:
        choice = self.tuning.as_dict().get(k.name) if self.tuning and k.configs else None
        if choice is not None:
            k.choose(choice, self.tuning.device_name)

    def flush_expr(self, *exprs: ir.Expr) -> None:
        for e in exprs:
            for b in ir.buffers_of(e):
                self.flush(b)

    def materialize(self, e: ir.Expr) -> ir.Load:
        """Make ``e`` a contiguous buffer, fusing it into a pending producer when possible."""
        if isinstance(e, ir.Load) and e.offset == 0 and _contig(e.shape, e.strides) \
                and ir.numel(e.shape) == ir.numel(self.shapes[e.buf][0]):
            return e
        for buf in ir.buffers_of(e):
            if self._joins(e, buf):
                p = self.pending.pop(buf)
                if p.epi is not None:  # compose: e reads buf, which is p.epi applied to the hole
                    inner = p.epi.expr
                    e = ir.substitute(e, buf, inner)
                new = self.new_buf()
                self.shapes[new] = (e.shape, e.dtype)
                labels = p.labels + [x for x in self.cur_labels if x not in p.labels]
                self.pending[new] = Pending(p.make, e.shape, e.dtype, labels,
                                            kernels.Epilogue(e, p.base), p.base)
                return ir.Load(e.shape, e.dtype, new, ir.contiguous_strides(e.shape), 0)
        for buf in ir.buffers_of(e):
            if self._spreads(e, buf):
                return self._spread(e, buf)
        return self.kernel(lambda w, out, e=e: kernels.pointwise(w, e, out), e.shape, e.dtype)

    def _spreads(self, e: ir.Expr, buf: str) -> bool:
        """Whether ``e`` can be stored by the pending reduction writing ``buf`` instead of its
        result: ``e`` has the reduced tensor's shape, reads ``buf`` only broadcast along the
        reduced dims (through pointwise ops, at the row being reduced) and nothing else needs
        the result."""
        p = self.pending.get(buf)
        if p is None or p.rows is None or p.epi is not None or e.shape != p.rows.x.shape:
            return False
        kept = [d for d in range(len(e.shape)) if d not in p.rows.dims]
        row_strides = dict(zip(kept, ir.contiguous_strides(tuple(e.shape[d] for d in kept)),
                               strict=True))
        ok = True

        def walk(x: ir.Expr, direct: bool) -> None:
            nonlocal ok
            if isinstance(x, ir.Load):
                if x.buf == buf and not (direct and x.offset == 0 and all(
                        n == 1 or s == row_strides.get(d, 0)
                        for d, (s, n) in enumerate(zip(x.strides, x.shape, strict=True)))):
                    ok = False
            elif isinstance(x, ir.Op):
                for a in x.args:
                    walk(a, direct and x.name not in ir.INDEX_OPS)
            else:
                for child in ir.children(x):
                    walk(child, False)

        walk(e, True)
        return ok and not self._live_elsewhere(buf, e)

    def _spread(self, e: ir.Expr, buf: str) -> ir.Load:
        """The pending reduction writing ``buf`` stores ``e`` instead (see ``_spreads``)."""
        p = self.pending.pop(buf)
        new = self.new_buf()
        self.shapes[new] = (e.shape, e.dtype)
        labels = p.labels + [x for x in self.cur_labels if x not in p.labels]
        make = p.rows.make(kernels.Epilogue(e, buf))
        self.pending[new] = Pending(make, e.shape, e.dtype, labels, None, new)
        return ir.Load(e.shape, e.dtype, new, ir.contiguous_strides(e.shape), 0)

    def joins_pending(self, e: ir.Expr) -> bool:
        """Whether ``materialize(e)`` would add ``e`` to a pending kernel's epilogue (no pass of
        its own) rather than write it with a kernel of its own."""
        return any(self._joins(e, buf) for buf in ir.buffers_of(e))

    def _joins(self, e: ir.Expr, buf: str) -> bool:
        return buf in self.pending and self._fusable(e, buf) and not self._live_elsewhere(buf, e)

    def _fusable(self, e: ir.Expr, buf: str) -> bool:
        shape = self.shapes[buf][0]
        if ir.numel(e.shape) != ir.numel(shape):
            return False
        ok = True

        def walk(x: ir.Expr, direct: bool) -> None:
            nonlocal ok
            if isinstance(x, ir.Load):
                if x.buf == buf and not (direct and x.offset == 0 and _contig(x.shape, x.strides)):
                    ok = False
            elif isinstance(x, ir.Op):
                for a in x.args:
                    walk(a, direct and x.name not in ir.INDEX_OPS)
            else:  # views, concatenations, gathers read their children elsewhere
                for child in ir.children(x):
                    walk(child, False)

        walk(e, True)
        return ok

    def _live_elsewhere(self, buf: str, e: ir.Expr) -> bool:
        """Does any value still needed, other than ``e`` itself, read ``buf``?"""
        inside = _reachable(e)
        others = [a for a in self.cur_args if id(a) not in inside] + self.extra_live
        # an argument given twice (einsum(eq, y, y)) is still needed after one use is fused
        twice = [a for a in self.cur_args if sum(b is a for b in self.cur_args) > 1]
        if any(buf in ir.buffers_of(a) for a in others + twice):
            return True
        if any(buf in self._pending_reads(other) for other in self.pending if other != buf):
            return True  # a kernel not written yet reads it: buf must still be produced
        for node, value in self.env.items():
            if not any(self.pos[u] > self.cur for u in node.users):
                continue
            for v in _flat((value,), {}, deep=True):
                reads = v.needs if isinstance(v, Deferred) and not v.done else (v,)
                if any(isinstance(r, ir.Expr) and buf in ir.buffers_of(r) for r in reads):
                    return True
        return False

    def _pending_reads(self, buf: str) -> frozenset[str]:
        """The buffers the pending kernel writing ``buf`` reads (its template written once to a
        scratch writer; a buffer name is registered once, so its reads never change)."""
        p = self.pending[buf]
        if buf not in self._reads_cache:
            w = kernels.Writer("KERNEL_NAME", "", self.blocks)
            w.epilogue = p.epi
            k = p.make(w, buf)
            made = [k] + ([k.fill] if k.fill is not None else [])
            self._reads_cache[buf] = frozenset(b for kk in made for b in kk.buffers) - {buf}
        return self._reads_cache[buf]

    def _own_buffer(self, buf: str) -> bool:
        """A tensor allocated by this forward (not an input or parameter: returning a view of
        those would alias them, which the judge rejects)."""
        return buf not in self.prog.input_names and buf not in self.params.values()

    def output(self, node: fx.Node):
        (result,) = node.args
        values = fx.node.map_arg(result, lambda n: _forced(self.env[n]))
        single = not isinstance(values, tuple | list)
        outs = []
        srcs = [result] if single else list(result)
        vals = [values] if single else list(values)
        self.cur_args = []
        for i, (src, v) in enumerate(zip(srcs, vals, strict=True)):
            line, text = node_line(src, self.cap.lines) if isinstance(src, fx.Node) else (0, "")
            if isinstance(v, Complex):
                raise UnsupportedOperatorError(_label(src, self.cap.gm), line, text,
                                               "a complex output (view_as_real of it converts)")
            if isinstance(v, Missing):
                raise UnsupportedOperatorError(
                    _label(src, self.cap.gm), line, text, f"returns {v.what}"
                )
            if isinstance(v, tuple | list):
                line, text = node_line(node, self.cap.lines)  # the return statement
                raise UnsupportedOperatorError("output", line, text, "a nested output (programs "
                                               "return a tensor or a flat tuple of tensors)")
            if not isinstance(v, ir.Expr):
                raise UnsupportedOperatorError("output", line, text, "non-tensor output")
            self.extra_live = [o for j, o in enumerate(vals) if j > i and isinstance(o, ir.Expr)]
            self.cur_labels = list(self.labels.get(src, [])) if isinstance(src, fx.Node) else []
            if isinstance(v, ir.Const):  # a literal in kernels: give it one value per element
                v = ir.reshape(ir.arange(max(1, ir.numel(v.shape)), v.value, 0, v.dtype), v.shape)
            others = [o for j, o in enumerate(vals) if j != i and isinstance(o, ir.Expr)]
            if (isinstance(v, ir.Load) and self._own_buffer(v.buf)
                    and not (v.offset == 0 and _contig(v.shape, v.strides))
                    and all(stride >= 0 for stride in v.strides)  # as_strided has no flips
                    and not any(v.buf in ir.buffers_of(o) for o in others)):
                # a view of a buffer this forward made (transpose, slice, expand of a result):
                # returned as a view, as eager does, rather than copied by one more kernel
                self.flush(v.buf)
                outs.append(f"{v.buf}.as_strided({v.shape!r}, {tuple(v.strides)!r}, {v.offset})")
                continue
            load = self.materialize(v)
            if not (load.offset == 0 and _contig(load.shape, load.strides)
                    and self._own_buffer(load.buf)):  # an input's or parameter's view is copied
                load = self.kernel(lambda w, out, e=load: kernels.pointwise(w, e, out),
                                   load.shape, load.dtype)
            self.flush(load.buf)
            base_shape = self.shapes[load.buf][0]
            outs.append(
                load.buf if base_shape == load.shape else f"{load.buf}.view({load.shape!r})"
            )
        self.prog.body.append("return " + (outs[0] if single else "(" + ", ".join(outs) + ",)"))
        return None

    # ------------------------------------------------------------ dispatch
    def call_module(self, node: fx.Node, args, kwargs):
        mod = self.cap.gm.get_submodule(node.target)
        prefix = node.target

        def p(name: str):  # a dotted name reaches a submodule's tensor (``out_proj.weight``)
            t = mod
            for part in name.split("."):
                t = getattr(t, part, None)
            return None if t is None else self.param(f"{prefix}.{name}")

        handler = MODULES.get(type(mod))
        if handler is None and torch.nn.utils.parametrize.is_parametrized(mod):
            handler = MODULES.get(type(mod).__mro__[1])  # the module it parametrizes
            p = self._parametrized(mod, prefix, p)
        if handler is None:
            raise Unsupported(f"module {type(mod).__name__}")
        return handler(self, mod, p, *args, **kwargs)

    def _parametrized(self, mod: torch.nn.Module, prefix: str, p):
        """``p`` for a module whose tensors are computed by parametrizations: weight norm
        (``nn.utils.parametrizations.weight_norm``) is ``v * (g / ||v||)`` over every dim but
        its ``dim``, as ``torch._weight_norm`` computes it; other parametrizations are refused."""
        from torch.nn.utils.parametrizations import _WeightNorm

        def q(name: str):
            if name not in mod.parametrizations:
                return p(name)
            chain = list(mod.parametrizations[name])
            if len(chain) != 1 or not isinstance(chain[0], _WeightNorm):
                raise Unsupported(f"parametrization {type(chain[0]).__name__} of {name}")
            base = f"{prefix}.parametrizations.{name}"
            g, v = self.param(f"{base}.original0"), self.param(f"{base}.original1")
            dim = chain[0].dim  # -1 (weight_norm's dim=None): one norm over the whole tensor
            dims = [d for d in range(len(v.shape)) if dim in (None, -1) or d != dim]
            norm = FUNCTIONS[torch.norm](self, v, 2, dims, True)
            return ir.op("mul", v, ir.op("div", g, norm))

        return q

    def call_method(self, name: str, args, kwargs):
        if name.endswith("_") and not name.startswith("_"):
            name = name[:-1]  # in-place variant; check_inplace made sure it is safe
        handler = METHODS.get(name)
        if handler is None:
            fn = getattr(torch, name, None)
            handler = FUNCTIONS.get(fn) if fn is not None else None
        if handler is None:
            raise Unsupported(f"method .{name}()")
        return handler(self, *args, **kwargs)

    def call_function(self, target, args, kwargs):
        if all(not isinstance(v, ir.Expr) for v in _flat(args, kwargs)) and target in PY_OPS:
            return target(*args, **kwargs)
        handler = FUNCTIONS.get(target)
        if handler is None:
            if isinstance(target, torch._ops.OpOverload):
                raise Unsupported("no lowering, and no decomposition into ops that have one")
            raise Unsupported(f"function {getattr(target, '__name__', target)}")
        return handler(self, *args, **kwargs)

    # ------------------------------------------------------------ helpers for handlers
    def t(self, v) -> ir.Expr:
        """A tensor-or-scalar argument as an Expr."""
        if isinstance(v, ir.Expr):
            return v
        if isinstance(v, bool | int | float):
            return ir.const(v)
        raise Unsupported(f"argument of type {type(v).__name__}")

    def as_torch(self, e: ir.Expr) -> str:
        """A torch view expression for an Expr (hybrid mode): strided view of a buffer."""
        if not isinstance(e, ir.Load):
            e = self.materialize(e)
        self.flush(e.buf)
        base_shape = self.shapes[e.buf][0]
        if e.offset == 0 and _contig(e.shape, e.strides) and base_shape == e.shape:
            return e.buf
        # as_strided's offset counts from the storage's start: an input or a parameter may be a
        # view into a larger storage (an RNN's weights, flattened into one buffer on CUDA)
        offset = (str(e.offset) if self._own_buffer(e.buf)
                  else f"{e.buf}.storage_offset() + {e.offset}")
        return f"{e.buf}.as_strided({e.shape!r}, {tuple(e.strides)!r}, {offset})"

    def vendor_product(self, signature: str, flops: float) -> bool:
        """Whether the next matrix product or convolution calls the vendor library: in hybrid
        mode, unless ``config.triton_products`` keeps it in Triton. Numbers every product, in
        lowering order, whatever the mode (``Program.products``)."""
        index = len(self.prog.products)
        self.prog.products.append(Product(signature, float(flops)))
        return self.config.mode == "hybrid" and index not in self.config.triton_products

    def torch_call(self, code: str, shape: ir.Shape, dtype: torch.dtype) -> ir.Load:
        buf = self.new_buf()
        self.prog.body.append(f"{buf} = {code}")
        self.shapes[buf] = (tuple(shape), dtype)
        self.emitted.add(buf)
        return ir.Load(tuple(shape), dtype, buf, ir.contiguous_strides(tuple(shape)), 0)


def _contig(shape: ir.Shape, strides: tuple[int, ...]) -> bool:
    want = ir.contiguous_strides(shape)
    return all(s == w for s, w, n in zip(strides, want, shape, strict=True) if n != 1)


@dataclass(frozen=True)
class Complex:
    """A complex tensor as its real and imaginary parts, two real expressions of one shape:
    what complex code (a rotary embedding by complex products) holds between
    ``view_as_complex`` and ``view_as_real``. Views apply to both parts; ``+``, ``-`` and ``*``
    follow their rules; every other op refuses it."""

    re: ir.Expr
    im: ir.Expr

    @property
    def shape(self) -> ir.Shape:
        return self.re.shape


def select_last(x: ir.Expr, k: int) -> ir.Expr:
    """``x[..., k]`` as a lazy view."""
    maps = tuple((d, 0, 1) for d in range(len(x.shape) - 1)) + ((-1, k, 0),)
    return ir.view(x, x.shape[:-1], maps)


COMPLEX_ARITHMETIC = {operator.add: "add", torch.add: "add", "add": "add",
                      operator.sub: "sub", torch.sub: "sub", "sub": "sub",
                      operator.mul: "mul", torch.mul: "mul", "mul": "mul"}
COMPLEX_TAKERS = {torch.view_as_real}  # lowerings of their own that take complex values
# torch.nn.functional's in-place spellings (``F.relu_(x)`` changes x)
INPLACE_FUNCTIONS = {getattr(F, n) for n in dir(F) if n.endswith("_") and not n.startswith("_")}


def _part(value, which: str):
    """``value`` (nested args) with each complex value replaced by its ``re`` or ``im`` part."""
    return fx.node.map_aggregate(
        value, lambda v: getattr(v, which) if isinstance(v, Complex) else v)


VIEW_METHODS = {"view", "reshape", "view_as", "reshape_as", "transpose", "permute", "t", "squeeze",
                "unsqueeze", "expand", "expand_as", "narrow", "flatten", "unflatten", "chunk",
                "split", "unbind", "contiguous", "detach", "swapaxes", "swapdims", "as_strided"}
VIEW_FUNCTIONS = {operator.getitem, getattr, torch.reshape, torch.transpose, torch.permute,
                  torch.squeeze, torch.unsqueeze, torch.flatten, torch.narrow, torch.chunk,
                  torch.split, torch.t, torch.swapaxes, torch.unbind}


def _is_view(node: fx.Node) -> bool:
    if node.op == "call_method":
        return node.target in VIEW_METHODS
    if node.op == "call_function":
        return node.target in VIEW_FUNCTIONS
    if node.op != "call_module":
        return False
    module = node.graph.owning_module.get_submodule(node.target)
    return type(module) in (torch.nn.Flatten, torch.nn.Unflatten, torch.nn.Identity)


def _reachable(e: ir.Expr) -> set[int]:
    return {id(x) for x in ir.nodes(e)}


def _flat(args, kwargs, deep: bool = False):
    """Leaves of nested args; structseq results (torch.max, cummax) only when ``deep``."""
    out = []

    def rec(v):
        if type(v) in (tuple, list) or (deep and isinstance(v, tuple)):
            for x in v:
                rec(x)
        elif isinstance(v, dict):
            for x in v.values():
                rec(x)
        else:
            out.append(v)

    rec(args)
    rec(kwargs)
    return out


PY_OPS = {operator.add, operator.sub, operator.mul, operator.truediv, operator.floordiv,
          operator.getitem, operator.neg, operator.pow, getattr, operator.mod}

# handler tables, filled by drtriton.compiler.ops
FUNCTIONS: dict[object, Callable] = {}
METHODS: dict[str, Callable] = {}
MODULES: dict[type, Callable] = {}
FUNCTIONS[unavailable] = lambda lowering, what: Missing(what)

__all__ = ["Lowering", "Program", "Unsupported", "Missing", "FUNCTIONS", "METHODS", "MODULES",
           "math", "F"]


def _identity(launched: list[kernels.Kernel]) -> tuple:
    """What makes kernels one: their code (before naming), tuning space, fixed constants and
    work (the autotuner's key), so a twin's measured choice is this launch's choice too."""
    return tuple((k.source, k.configs, tuple(sorted(k.consts.items())), k.warps, k.stages,
                  k.work, tuple(sorted(k.helpers))) for k in launched)
