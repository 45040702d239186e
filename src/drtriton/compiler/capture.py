"""Capture a KernelBench program: its torch.fx graph with static shapes, and its constructor.

``capture(source)`` loads the (trusted) reference, builds ``Model(*get_init_inputs())``, traces
``forward`` with ``torch.fx.symbolic_trace`` semantics (stack traces on, so every node knows its
source line), and propagates shapes and dtypes with the reference's own ``get_inputs()`` (on the
meta device when possible, so capture costs no compute). It also extracts ``Model.__init__`` as
source, rewritten to use only ``torch`` names, so ``ModelNew`` creates the same parameters in the
same order and seeded initialisation matches.
"""

from __future__ import annotations

import ast
import contextlib
import functools
import itertools
import keyword
import operator
import re
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field

import torch
import torch.fx as fx
from torch.fx.passes.shape_prop import ShapeProp

from drtriton.compiler.config import UnsupportedOperatorError
from drtriton.program import TORCH_STATE_LOCK, load_program, parse_python

FILENAME = "drtriton-reference"


def attribute_name(part: str) -> bool:
    """Whether ``x.<part>`` is Python (an identifier, not a keyword such as ``in``)."""
    return part.isidentifier() and not keyword.iskeyword(part)


def _format_target(base: str, target: str) -> str:
    """fx's own, with keywords read by ``getattr`` too: fx wrote ``self.branches.in(x)`` for a
    ``ModuleDict`` key ``"in"``, code that does not compile, in both captures."""
    for part in target.split("."):
        base = f"{base}.{part}" if attribute_name(part) else f"getattr({base}, {part!r})"
    return base


fx.graph._format_target = _format_target  # the module global fx's code generator calls


@dataclass
class Captured:
    gm: fx.GraphModule
    model: torch.nn.Module
    lines: list[str]
    init_src: str  # ModelNew.__init__ definition (indented for a class body)
    preamble: str  # module-level constants/classes the constructor needs
    input_names: list[str]
    example_inputs: list
    training: bool = True  # the mode Model was in when traced (as its constructor left it)
    mode_dependent: bool = False  # whether forward differs between training and eval mode
    # defaults of the forward parameters get_inputs leaves out (by position), which the trace
    # was specialised to and ModelNew's forward keeps
    defaults: dict[int, object] = field(default_factory=dict)
    # every Python scalar the trace was specialised to (given by get_inputs or a default left
    # out), by position: ModelNew's forward refuses other values
    specialised: dict[int, object] = field(default_factory=dict)
    bases: str = "torch.nn.Module"  # ModelNew's, as Model's (``extract_init``)


def node_line(node: fx.Node, lines: list[str]) -> tuple[int, str]:
    """(line number, text) of the reference source line that created ``node``."""
    trace = node.stack_trace or ""
    found = re.findall(rf'File "<{FILENAME}>", line (\d+)', trace)
    if not found:  # some nodes (getattr on results) carry no trace: use their input's line
        for m in node.all_input_nodes:
            n, text = node_line(m, lines)
            if n:
                return n, text
        return 0, ""
    n = int(found[-1])
    return n, lines[n - 1].strip() if 0 < n <= len(lines) else ""


PACKING = ("pack_padded_sequence", "pack_sequence")  # of torch.nn.utils.rnn


@contextlib.contextmanager
def refusing_packed_sequences(module, lines: list[str]) -> Iterator[None]:
    """While tracing, a call that packs variable-length sequences raises a refusal naming
    itself and the reference's line (traced, they fail deep inside, far from the cause). The
    functions are swapped in ``torch.nn.utils.rnn`` and in the reference's own globals."""
    rnn = torch.nn.utils.rnn
    originals = [getattr(rnn, name) for name in PACKING]

    def refusal(name: str):
        def refuse(*args, **kwargs):
            frame, line = sys._getframe(1), 0
            while frame is not None and not line:
                if frame.f_code.co_filename == f"<{FILENAME}>":
                    line = frame.f_lineno
                frame = frame.f_back
            text = lines[line - 1].strip() if 0 < line <= len(lines) else ""
            raise UnsupportedOperatorError(name, line, text, "packed variable-length sequences "
                                           "(pass the padded batch, masking the padding)")
        return refuse

    saved = [(space, key, value) for space in (vars(rnn), vars(module))
             for key, value in list(space.items()) if any(value is f for f in originals)]
    for space, key, value in saved:
        space[key] = refusal(value.__name__)
    try:
        yield
    finally:
        for space, key, value in saved:
            space[key] = value


def capture(source: str, lowered: frozenset[type] | None = None) -> Captured:
    """``lowered``: module types the compiler lowers whole (kept as calls in the graph); any
    other module is traced through, down to the functions it calls. None: fx's own rule (the
    modules of ``torch.nn`` are kept)."""
    with TORCH_STATE_LOCK:  # a seed, a trace and eager shape runs: see its comment
        module = load_program(source, FILENAME)
        init_inputs = list(module.get_init_inputs())
        torch.manual_seed(0)
        model = module.Model(*init_inputs)
        inputs = meta_inputs(module)
        with refusing_packed_sequences(module, source.splitlines()):
            try:
                tracer, graph = _trace(model, module, inputs, lowered)
            except UnsupportedOperatorError:
                # a module traced through did not trace: keep torch.nn's modules whole, so
                # the lowering names the one it cannot lower
                lowered = None
                tracer, graph = _trace(model, module, inputs, lowered)
        gm = fx.GraphModule(tracer.root, graph)
        _refuse_random_constants(gm, model, module, inputs, lowered)
        if inputs is None or not propagate_on_meta(gm, inputs):
            # some op without a meta kernel (or inputs that need data): run the real thing once
            inputs = list(module.get_inputs())
            with torch.no_grad():
                ShapeProp(gm).propagate(*inputs)
    names = [n.target for n in gm.graph.nodes if n.op == "placeholder"]
    init_src, preamble, bases = extract_init(source)
    return Captured(gm, model, source.splitlines(), init_src, preamble, names, inputs,
                    model.training, mode_dependent(model, source),
                    _left_defaults(model, None if inputs is None else len(inputs)),
                    specialised_positions(model, inputs), bases)


def mode_dependent(model: torch.nn.Module, source: str) -> bool:
    """Whether ``model``'s forward may compute differently in training and in eval mode: it
    reads ``.training`` (its own code, or a traced-through helper's), or holds a module that
    does (batch norm with running statistics, dropout, recurrent or attention dropout). The
    compiled forward is specialised to the traced mode, so it must refuse the other."""
    if re.search(r"\.training\b|\btraining\s*=", source):
        return True
    nn = torch.nn
    for m in model.modules():
        if isinstance(m, nn.modules.batchnorm._NormBase) and m.track_running_stats:
            return True
        if isinstance(m, nn.modules.dropout._DropoutNd) and m.p > 0:
            return True
        if isinstance(m, nn.RNNBase | nn.MultiheadAttention) and m.dropout > 0:
            return True
    return False


def _refuse_random_constants(gm: fx.GraphModule, model: torch.nn.Module, module, inputs,
                             lowered: frozenset[type] | None) -> None:
    """Tensors the trace folds into constants (``_tensor_constantN``) must not be random draws
    (``torch.randn(3)`` in ``forward``): a candidate would repeat one draw. Traced again under
    another seed, a random one changes."""
    folded = [n.target for n in gm.graph.nodes
              if n.op == "get_attr" and str(n.target).startswith("_tensor_constant")]
    if not folded:
        return
    first = [gm.get_buffer(t).clone() for t in folded]
    with TORCH_STATE_LOCK:  # reentrant: capture holds it already
        torch.manual_seed(1)
        tracer, graph = _trace(model, module, inputs, lowered)
        again = fx.GraphModule(tracer.root, graph)
    redone = [again.get_buffer(n.target) for n in again.graph.nodes  # the same order, new names
              if n.op == "get_attr" and str(n.target).startswith("_tensor_constant")]
    for one, other in itertools.zip_longest(first, redone):
        if other is None or one is None or not _same(one, other):
            raise UnsupportedOperatorError(
                "forward", 0, "", "a tensor made in forward without inputs differs between "
                "runs (random numbers?): a candidate cannot repeat it")


def _same(a: torch.Tensor, b: torch.Tensor) -> bool:
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    if a.is_meta or b.is_meta:  # no values to compare: the lowering reads none from it either
        return True
    return torch.equal(a, b) or (a.is_floating_point()
                                 and torch.allclose(a, b, rtol=0, atol=0, equal_nan=True))


def _trace(model: torch.nn.Module, module, inputs: list | None,
           lowered: frozenset[type] | None = None) -> tuple[fx.Tracer, fx.Graph]:
    """Trace ``forward`` symbolically; where that fails, again with the inputs' shapes known
    (``MetaTracer``: sizes read in ``forward`` are then plain ints, so a buffer sliced by a
    sequence length, ``self.cos[:x.shape[2]]``, traces)."""
    tracer = _Tracer(lowered)
    tracer.record_stack_traces = True
    concrete = _scalar_inputs(model, inputs)
    try:
        return tracer, _unassert(tracer.trace(model, concrete_args=concrete or None), concrete)
    except UnsupportedOperatorError:
        raise
    except Exception as exc:  # data-dependent control flow, untraceable calls, ...
        first = exc
    try:
        return _trace_with_shapes(model, module, inputs, lowered)
    except UnsupportedOperatorError:
        raise
    except Exception:  # noqa: BLE001 - the plain trace's error says more
        pass
    raise UnsupportedOperatorError(
        "forward", 0, "", f"cannot trace forward(): {type(first).__name__}: {first}") from first


def _trace_with_shapes(model: torch.nn.Module, module, inputs: list | None, lowered):
    import inspect
    import warnings

    if inputs is None:
        inputs = list(module.get_inputs())
    names = list(inspect.signature(model.forward).parameters)
    metas = {n: x.to("meta") for n, x in zip(names, inputs, strict=False)
             if isinstance(x, torch.Tensor)}
    tracer = _shape_tracer()
    tracer.lowered = lowered
    tracer.record_stack_traces = True
    concrete = _scalar_inputs(model, inputs)
    with warnings.catch_warnings():  # ops without meta values fall back to symbolic sizes
        warnings.simplefilter("ignore")
        graph = tracer.trace(model, meta_args=metas, concrete_args=concrete or None)
        return tracer, _unassert(graph, concrete)


SCALAR_TYPES = (bool, int, float, type(None))


def _left_defaults(model: torch.nn.Module, given: int | None) -> dict[int, object]:
    """The defaults of the forward parameters after the first ``given`` (the ones get_inputs
    leaves out), by position; none when the inputs are not known."""
    import inspect

    if given is None:
        return {}
    params = list(inspect.signature(model.forward).parameters.values())
    return {i: p.default for i, p in enumerate(params) if i >= given
            and p.default is not inspect.Parameter.empty and type(p.default) in SCALAR_TYPES}


def _scalar_inputs(model: torch.nn.Module, inputs: list | None) -> dict:
    """The forward inputs that are Python scalars (numbers, bools, None), by parameter name:
    the trace is specialised to their values, as to the tensors' shapes (``get_inputs`` fixes
    both). None for ``inputs`` (``get_inputs`` needs real data, not drawn yet): none known."""
    import inspect

    if inputs is None:
        return {}
    params = list(inspect.signature(model.forward).parameters.values())
    given = {p.name: v for p, v in zip(params, inputs, strict=False) if type(v) in SCALAR_TYPES}
    # a parameter get_inputs leaves out takes its default (``mask=None``), fixed as a given one
    left = {params[i].name: v for i, v in _left_defaults(model, len(inputs)).items()}
    return given | left


def specialised_positions(model: torch.nn.Module, inputs: list | None) -> dict[int, object]:
    """``_scalar_inputs`` by the parameter's position instead of its name."""
    import inspect

    names = list(inspect.signature(model.forward).parameters)
    return {names.index(name): v for name, v in _scalar_inputs(model, inputs).items()}


def _unassert(graph: fx.Graph, concrete: dict) -> fx.Graph:
    """Drop the checks fx adds for specialised inputs (``alpha == 0.5`` then ``_assert``): the
    specialised placeholders stay, unused, so ``ModelNew.forward`` keeps the signature."""
    placeholders = [n for n in graph.nodes if n.op == "placeholder"]
    for node in placeholders:
        if node.target.rsplit("_", 1)[0] not in concrete and node.target not in concrete:
            continue
        for user in list(node.users):
            for check in list(user.users):
                if check.target in (torch._assert, torch.fx._symbolic_trace._assert_is_none):
                    graph.erase_node(check)
            if not user.users and user.op == "call_function":
                graph.erase_node(user)
    return graph


AUGMENTED = "drtriton_augmented"  # node.meta key: the call of an augmented assignment
_AUGMENTED_OPS = {"__iadd__": operator.add, "__isub__": operator.sub, "__imul__": operator.mul,
                  "__itruediv__": operator.truediv}


def _augmented(op):
    def method(self, other):
        proxy = self.tracer.create_proxy("call_function", op, (self, other), {})
        proxy.node.meta[AUGMENTED] = True
        return proxy
    return method


def _with_augmented_assignments(cls: type) -> type:
    """``cls`` with ``h += x`` recorded as ``h + x`` marked as an augmented assignment: fx's
    Proxy has no in-place operators, so Python rebinds only the one name, and another name of
    the tensor (``out = h; out -= 1``) would miss the update the tensor gets in PyTorch. The
    lowering makes the call in place where the tensor is read again (``Lowering.check_inplace``)."""
    for name, op in _AUGMENTED_OPS.items():
        setattr(cls, name, _augmented(op))
    return cls


@_with_augmented_assignments
class _AugmentedProxy(fx.Proxy):
    pass


class _Tracer(fx.Tracer):
    """fx's tracer, keeping as calls only the modules the compiler lowers whole."""

    def proxy(self, node: fx.Node) -> fx.Proxy:
        return _AugmentedProxy(node, self)

    def __init__(self, lowered: frozenset[type] | None) -> None:
        super().__init__(autowrap_functions=kept_functions())
        self.lowered = lowered
        # buffers read in forward stay attributes (``self.cos[:s]``): folded into the graph as
        # constants, a large one could not be written into ModelNew
        self.proxy_buffer_attributes = True

    def is_leaf_module(self, m: torch.nn.Module, qualname: str) -> bool:
        return _is_leaf(self, m, qualname, super().is_leaf_module)


def _is_leaf(tracer, m: torch.nn.Module, qualname: str, default) -> bool:
    lowered = tracer.lowered
    if lowered is None:
        return default(m, qualname)
    kind = type(m)
    if torch.nn.utils.parametrize.is_parametrized(m):
        kind = kind.__mro__[1]  # the module it parametrizes
    return kind in lowered


@functools.cache
def _shape_tracer_class():
    from torch.fx.experimental.meta_tracer import MetaProxy, MetaTracer

    @_with_augmented_assignments
    class SizedProxy(MetaProxy):
        """MetaProxy, but ``size(0)`` is the size of dim 0 (MetaProxy drops a falsy dim and
        returns every size)."""

        def size(self, dim: int | None = None):
            meta = getattr(self, "_tensor_meta", None)
            if meta is not None:
                return meta.size() if dim is None else meta.size(dim)
            args = (self,) if dim is None else (self, dim)
            return self.tracer.create_proxy("call_method", "size", args, {})

        def dim(self) -> int | fx.Proxy:
            meta = getattr(self, "_tensor_meta", None)
            return meta.dim() if meta is not None else self.tracer.create_proxy(
                "call_method", "dim", (self,), {})

        def numel(self) -> int | fx.Proxy:
            meta = getattr(self, "_tensor_meta", None)
            return meta.numel() if meta is not None else self.tracer.create_proxy(
                "call_method", "numel", (self,), {})

        def __getattr__(self, attr: str):
            # ``x.shape`` and ``x.ndim`` as plain ints where the shape is known, as ``size()``:
            # code computes with them (``int(w.shape[0] / (H * W))``, ``(1,) * (x.ndim - 1)``)
            if attr in ("shape", "ndim"):
                meta = self.__dict__.get("_tensor_meta")
                if meta is not None:
                    return getattr(meta, attr)
            return super().__getattr__(attr)

        @property
        def is_nested(self) -> bool:  # traced tensors are never nested
            return False

    class ShapeTracer(MetaTracer):
        lowered: frozenset[type] | None = None
        proxy_buffer_attributes = True  # as _Tracer's

        def proxy(self, node: fx.Node) -> SizedProxy:
            return SizedProxy(node, self)

        def is_leaf_module(self, m: torch.nn.Module, qualname: str) -> bool:
            return _is_leaf(self, m, qualname, super().is_leaf_module)

        def create_proxy(self, kind, target, args, kwargs, *rest, **options):
            if kind == "call_module":  # the module's output shape, from meta weights
                self.orig_forward = _on_meta(self.root.get_submodule(target))
            return super().create_proxy(kind, target, args, kwargs, *rest, **options)

    return ShapeTracer


def _on_meta(module: torch.nn.Module):
    """``module``'s forward with its parameters and buffers on the meta device (no copies of
    data): the shape tracer runs a kept module on meta inputs to know its output's shape, and
    the module's own CPU weights would not mix with them. The forward is called directly, not
    through ``__call__``, which the tracer has patched; the weights are put back after."""
    def forward(*args, **kwargs):
        saved = []
        for sub in module.modules():
            for table in (sub._parameters, sub._buffers):
                for name, value in table.items():
                    if value is not None:
                        saved.append((table, name, value))
                        table[name] = value.detach().to("meta")
        try:
            return type(module).forward(module, *args, **kwargs)
        finally:
            for table, name, value in saved:
                table[name] = value
    return forward


def _shape_tracer() -> fx.Tracer:
    """A tracer that knows the inputs' shapes (its class is made on first use: it subclasses
    ``torch.fx.experimental``'s, imported only when needed)."""
    return _shape_tracer_class()(autowrap_functions=kept_functions())


@functools.cache
def kept_functions() -> tuple:
    """Library functions kept as one call in the graph, not traced into: einops' (it refuses
    proxies), where einops is installed."""
    try:
        import einops
    except ImportError:
        return ()
    return (einops.rearrange,)


def meta_inputs(module) -> list | None:
    """``get_inputs()`` on the meta device: shapes without data (a GPU-scale program's inputs
    took 30 s and 11 GB to draw on the CPU). None when the function needs real data."""
    try:
        with torch.device("meta"):
            inputs = list(module.get_inputs())
    except Exception:
        return None
    if any(isinstance(x, torch.Tensor) and not x.is_meta for x in inputs):
        return None
    return inputs


def propagate_on_meta(gm: fx.GraphModule, inputs: list) -> bool:
    """Shapes/dtypes on every node from meta tensors (free); False when an op has no meta kernel."""
    try:
        meta_gm = fx.GraphModule(_meta_copy(gm), gm.graph)
        meta_in = [x.to("meta") if isinstance(x, torch.Tensor) else x for x in inputs]
        ShapeProp(meta_gm).propagate(*meta_in)
        return True
    except Exception:
        return False


def _meta_copy(gm: fx.GraphModule) -> torch.nn.Module:
    import copy

    root = copy.deepcopy(gm)
    return root.to("meta")


# ---------------------------------------------------------------- constructor extraction


class _TorchNames(ast.NodeTransformer):
    """Rewrite import aliases (nn, F, ...) to full torch paths; super(Model, self) to super()."""

    def __init__(self, aliases: dict[str, str]):
        self.aliases = aliases

    def visit_Name(self, node: ast.Name):
        target = self.aliases.get(node.id)
        if target is None or target == node.id:
            return node
        expr = parse_python(target, mode="eval").body
        return ast.copy_location(expr, node)

    def visit_Call(self, node: ast.Call):
        self.generic_visit(node)
        if isinstance(node.func, ast.Name) and node.func.id == "super" and node.args:
            node.args = []
        return node


def _aliases(tree: ast.Module) -> dict[str, str]:
    aliases = {}
    for stmt in tree.body:
        if isinstance(stmt, ast.Import):
            for a in stmt.names:
                aliases[a.asname or a.name.split(".")[0]] = (
                    a.name if a.asname else a.name.split(".")[0]
                )
        elif isinstance(stmt, ast.ImportFrom) and stmt.module:
            for a in stmt.names:
                aliases[a.asname or a.name] = f"{stmt.module}.{a.name}"
    return aliases


# libraries a constructor (or a helper class it builds) may use where they are installed: numbers
# (``np.log(1 / 0.07)``, CLIP's logit scale) and einops' functions and layers, which are lowered
LIBRARY_MODULES = frozenset({"numpy", "einops"})
# standard modules a constructor may use (numbers, configuration records)
PURE_MODULES = frozenset({"math", "dataclasses", "typing", "functools", "collections", "enum",
                          "itertools", "operator"})
_PLAIN_NODES = (ast.Constant, ast.Name, ast.Load, ast.Tuple, ast.List, ast.BinOp, ast.UnaryOp,
                ast.operator, ast.unaryop, ast.Attribute,
                # containers, comprehensions and calls (of builtins, helpers the program
                # defines, torch or pure modules: other roots are not plain)
                ast.Dict, ast.Set, ast.Subscript, ast.Slice, ast.Compare, ast.cmpop,
                ast.BoolOp, ast.boolop, ast.IfExp, ast.Starred, ast.Call, ast.keyword,
                ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp, ast.comprehension,
                ast.Store)
BUILTINS = frozenset({"range", "len", "int", "float", "bool", "str", "dict", "list", "tuple",
                      "set", "zip", "enumerate", "min", "max", "sum", "sorted", "reversed",
                      "round", "abs", "pow", "divmod", "map", "any", "all", "isinstance",
                      "True", "False", "None"})


def _free_names(value: ast.expr) -> set[str]:
    """The names ``value`` reads from outside itself (not its comprehensions' variables, not
    builtins)."""
    names = {n.id for n in ast.walk(value) if isinstance(n, ast.Name)}
    bound = {n.id for n in ast.walk(value)
             if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
    return names - bound - BUILTINS


def _drop_unresolved(defs: dict[str, ast.stmt], aliases: dict[str, str]) -> None:
    """Drop the assignments that read a name nothing copied defines (``bias_shape =
    (out_channels, 1, 1)`` after ``a, out_channels = 3, 8``): copied, they would fail at import,
    even where the constructor's own parameter of that name shadows them."""
    changed = True
    while changed:
        changed = False
        for name, stmt in list(defs.items()):
            if not isinstance(stmt, ast.Assign):
                continue
            if not _free_names(stmt.value) <= set(defs) | set(aliases):
                del defs[name]
                changed = True


def _plain_value(node: ast.expr, aliases: dict[str, str]) -> bool:
    """A module-level value a constructor may read: literals, other names, arithmetic,
    containers and comprehensions, attributes of torch or a pure module, and calls of those,
    of builtins or of the program's own helpers (``DTYPE = torch.bfloat16``, ``HIDDEN = 4 *
    DIM``, ``CFG = {"tiny": {"dim": 4}}``, ``NORM = partial(nn.LayerNorm, eps=1e-3)``)."""
    for sub in ast.walk(node):
        if not isinstance(sub, _PLAIN_NODES):
            return False
        if isinstance(sub, ast.Attribute):
            root = sub
            while isinstance(root, ast.Attribute):
                root = root.value
            module = aliases.get(root.id, "") if isinstance(root, ast.Name) else ""
            if not (module == "torch" or module.startswith("torch.") or module in PURE_MODULES):
                return False
    return True
PROGRAM_FUNCTIONS = ("get_inputs", "get_init_inputs")


def extract_init(source: str) -> tuple[str, str, str]:
    """``Model.__init__`` rewritten for ``ModelNew``, the module-level names it needs, and
    ``Model``'s bases as ``ModelNew``'s (``torch.nn.Sequential``, a helper class of the program,
    copied with the rest): its constructor is ``Model``'s, calling theirs."""
    tree = parse_python(source)
    aliases = _aliases(tree)
    pure = {k for k, v in aliases.items()  # copied as imports
            if v.split(".")[0] in PURE_MODULES
            or (v.split(".")[0] in LIBRARY_MODULES and _found(v))}
    bad = {k: v for k, v in aliases.items()
           if not (v == "torch" or v.startswith("torch.")) and k not in pure}
    model = next(s for s in tree.body if isinstance(s, ast.ClassDef) and s.name == "Model")
    init = next((s for s in model.body if isinstance(s, ast.FunctionDef) and s.name == "__init__"),
                None)
    fixer = _TorchNames(aliases)
    bases = ", ".join(ast.unparse(fixer.visit(b)) for b in model.bases) or "torch.nn.Module"
    if init is None:  # a base's constructor, with whatever arguments get_init_inputs gives
        init = parse_python("def __init__(self):\n    super().__init__()"
                            if bases == "torch.nn.Module" else
                            "def __init__(self, *args, **kwargs):\n"
                            "    super().__init__(*args, **kwargs)").body[0]
    # module-level definitions the constructor may use: literal constants, helper classes and
    # helper functions (e.g. torchvision's make_divisible)
    defs: dict[str, ast.stmt] = {}
    for stmt in tree.body:
        if isinstance(stmt, ast.ClassDef) and stmt.name != "Model":
            defs[stmt.name] = stmt
        elif isinstance(stmt, ast.FunctionDef) and stmt.name not in PROGRAM_FUNCTIONS:
            defs[stmt.name] = stmt
        elif (
            isinstance(stmt, ast.Assign)
            and len(stmt.targets) == 1
            and isinstance(stmt.targets[0], ast.Name)
            and _plain_value(stmt.value, aliases)
        ):
            defs[stmt.targets[0].id] = stmt
    _drop_unresolved(defs, aliases)
    needed: list[str] = []
    imports: list[str] = []

    def visit(node: ast.AST) -> None:
        for sub in ast.walk(node):
            if isinstance(sub, ast.Name):
                if sub.id in pure and sub.id not in imports:
                    imports.append(sub.id)
                if sub.id in bad:
                    raise UnsupportedOperatorError(
                        f"import {bad[sub.id]}", getattr(sub, "lineno", 0), "",
                        "the constructor uses a non-torch module",
                    )
                if sub.id in defs and sub.id not in needed:
                    needed.append(sub.id)
                    visit(defs[sub.id])

    body = _class_body(model, init)  # what ModelNew's constructor reads of the class
    for stmt in [*model.bases, *body]:
        visit(stmt)
    order = [s for s in tree.body if any(defs.get(n) is s for n in needed)]
    # _TorchNames spells every imported name in full (``dataclass`` as ``dataclasses.dataclass``)
    heads = [f"import {m}" for m in dict.fromkeys(_home(aliases[n]) for n in imports)]
    pre = "\n\n".join(["\n".join(heads)] * bool(heads)
                       + [ast.unparse(fixer.visit(s)) for s in order])
    text = "\n\n".join(ast.unparse(fixer.visit(stmt)) for stmt in body)
    return "\n".join("    " + ln if ln else ln for ln in text.splitlines()), pre, bases


def _home(target: str) -> str:
    """The module to import for ``target`` spelt in full: itself if it is a module, else the
    module that holds it (``einops.layers.torch`` for ``einops.layers.torch.Rearrange``)."""
    import importlib.util

    home = target.rsplit(".", 1)[0] if "." in target else target
    try:
        return target if importlib.util.find_spec(target) is not None else home
    except (ImportError, ValueError):  # ``a.b`` where ``a`` is a module and ``b`` is not
        return home


def _found(target: str) -> bool:
    """Whether ``target``'s module can be imported here (so the candidate can import it)."""
    import importlib.util

    try:
        return importlib.util.find_spec(target.split(".")[0]) is not None
    except (ImportError, ValueError):
        return False


def _class_body(model: ast.ClassDef, init: ast.FunctionDef) -> list[ast.stmt]:
    """``Model``'s class attributes (``expansion = 4``), the methods its constructor calls
    through ``self`` (``self._make_layer(...)``, transitively), then ``__init__``: ModelNew
    is built by the same code, so it must find the same names. ``forward`` is compiled."""
    methods = {s.name: s for s in model.body if isinstance(s, ast.FunctionDef)
               and s.name not in ("__init__", "forward")}
    reached: list[str] = []
    todo: list[ast.AST] = [init]
    while todo:
        for sub in ast.walk(todo.pop()):
            if (isinstance(sub, ast.Attribute) and isinstance(sub.value, ast.Name)
                    and sub.value.id in ("self", "cls") and sub.attr in methods
                    and sub.attr not in reached):
                reached.append(sub.attr)
                todo.append(methods[sub.attr])
    attributes = [s for s in model.body if isinstance(s, ast.Assign | ast.AnnAssign)]
    kept = [s for s in model.body if isinstance(s, ast.FunctionDef) and s.name in reached]
    return [*attributes, *kept, init]
