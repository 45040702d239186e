"""Capture at the ATen level: ``torch.export`` of the reference, mapped onto the lowerings.

``capture_exported(source)`` exports ``Model`` non-strict, specialised to ``get_inputs()``
(dynamo-free tracing in Python, so shape arithmetic and control flow on sizes run as plain
Python), and rewrites the exported graph into the graph ``lower`` reads:

* parameters and buffers become ``get_attr`` nodes named by their path in ``Model`` (so
  ``ModelNew`` reads its own copies); tensors made in ``forward`` become ``_tensor_constantN``;
* each ATen op becomes the PyTorch call with the same meaning that has a lowering: a tensor
  method or ``torch`` function of the same name first (their schemas are ATen's), then
  ``torch.nn.functional``; ops whose Python form orders or names arguments differently
  (``batch_norm``, the losses' integer ``reduction``, upsampling) have an adapter here;
* an op with neither is decomposed (PyTorch's own decompositions, only for those ops: LSTM and
  GRU become GEMMs and pointwise steps) and the result mapped again;
* buffer updates a forward makes in training mode (batch norm's running statistics) are
  dropped, as the fx capture's lowerings drop them: a candidate returns the outputs only.

The exported graph's nodes keep their stack traces, so errors name the reference's line.
"""

from __future__ import annotations

import contextlib
import copy
import inspect
import io
import logging
import operator
import warnings
from collections.abc import Callable

import torch
import torch.fx as fx
import torch.nn.functional as F
from torch.export.graph_signature import InputKind, OutputKind
from torch.fx.passes.shape_prop import _extract_tensor_metadata

from drtriton.compiler.capture import (
    FILENAME,
    Captured,
    _left_defaults,
    extract_init,
    meta_inputs,
    mode_dependent,
    node_line,
    refusing_packed_sequences,
    specialised_positions,
)
from drtriton.compiler.config import UnsupportedOperatorError
from drtriton.compiler.lower import FUNCTIONS, METHODS, unavailable
from drtriton.program import TORCH_STATE_LOCK, load_program

# how a call looks in the rewritten graph: (fx op, target, args, kwargs, first output only)
Call = tuple[str, object, tuple, dict, bool]

DROPPED_KWARGS = ("layout", "device", "pin_memory", "memory_format", "non_blocking")
IDENTITY_OPS = ("lift_fresh_copy", "detach", "detach_", "alias", "dropout_")  # value unchanged
CHECK_OPS = ("_assert_tensor_metadata", "_assert_async", "_assert_scalar", "sym_constrain_range",
             "sym_constrain_range_for_size", "_functional_assert_async")
REDUCTIONS = {0: "none", 1: "mean", 2: "sum"}  # ATen's integer reduction argument
PYTHON_HOMES = (torch._C._nn, torch._C._linalg, torch._C._special, F)
MAX_DECOMPOSITION_ROUNDS = 4


def capture_exported(source: str) -> Captured:
    """The reference's forward as ``torch.export`` sees it, ready for ``Lowering``."""
    with TORCH_STATE_LOCK:  # a seed and an export (fake tensors patch torch globally)
        module = load_program(source, FILENAME)
        torch.manual_seed(0)
        model = module.Model(*list(module.get_init_inputs()))
        with refusing_packed_sequences(module, source.splitlines()):
            program, inputs = _export_on_meta(model, module)
        try:
            gm = _rewrite(program, model, inputs, source.splitlines())
        except UnsupportedOperatorError:
            raise
        except Exception as exc:  # a mapping bug must refuse the program, never crash
            raise UnsupportedOperatorError(
                "forward", 0, "", f"internal error in the export capture: "
                f"{type(exc).__name__}: {exc}") from exc
    init_src, preamble, bases = extract_init(source)
    names = [n.target for n in gm.graph.nodes if n.op == "placeholder"]
    return Captured(gm, model, source.splitlines(), init_src, preamble, names, inputs,
                    model.training, mode_dependent(model, source),
                    _left_defaults(model, len(inputs)), specialised_positions(model, inputs),
                    bases)


@contextlib.contextmanager
def _quiet():
    """Without PyTorch's warnings and log lines (a failed export logs the partial graph): the
    error it raises says what went wrong, in one line."""
    logger = logging.getLogger("torch")
    level = logger.level
    logger.setLevel(logging.ERROR)
    try:
        with warnings.catch_warnings(), contextlib.redirect_stderr(io.StringIO()):
            warnings.simplefilter("ignore")
            yield
    finally:
        logger.setLevel(level)


def _export_on_meta(model: torch.nn.Module, module) -> tuple[torch.export.ExportedProgram, list]:
    """The export and the inputs it used: meta copies of the model and of ``get_inputs()``
    where that works (GPU-scale inputs took tens of seconds and GBs to draw on the CPU), else
    the real ones (a forward mixing its input with a tensor it makes on the CPU, or making a
    tensor from literals: on meta its values are lost)."""
    inputs = meta_inputs(module)
    copied = _copy_on_meta(model) if inputs is not None else None
    if copied is not None:
        try:
            program = _export(copied, inputs)
            if not any(isinstance(t, torch.Tensor) and t.is_meta
                       for t in program.constants.values()):
                return program, inputs
        except UnsupportedOperatorError:
            pass
    inputs = list(module.get_inputs())
    return _export(model, inputs), inputs


def _copy_on_meta(model: torch.nn.Module) -> torch.nn.Module | None:
    """A copy of ``model`` on the meta device; None where it cannot be copied (a computed
    tensor attribute, as the old ``torch.nn.utils.weight_norm`` leaves, refuses deepcopy)."""
    try:
        return copy.deepcopy(model).to("meta")
    except RuntimeError:
        return None


def _encoder_forward(self: torch.nn.TransformerEncoder, src: torch.Tensor,
                     mask: torch.Tensor | None = None,
                     src_key_padding_mask: torch.Tensor | None = None,
                     is_causal: bool | None = None) -> torch.Tensor:
    """``TransformerEncoder.forward`` as eager PyTorch computes it without gradients (the
    judge's and inference's mode), written so export can trace it. Eager takes the nested-tensor
    path where the conditions below hold and the padding mask is left-aligned (a data check
    export skips): the layers' output is 0 at padded positions, then ``self.norm`` applies."""
    layer = self.layers[0]
    nested = (torch.backends.mha.get_fastpath_enabled()
              and getattr(self, "use_nested_tensor", False) and not layer.training
              and src.dim() == 3 and src_key_padding_mask is not None and mask is None
              and not torch.is_autocast_enabled())
    if not nested:
        return _ENCODER_FORWARD(self, src, mask, src_key_padding_mask, is_causal)
    norm, self.norm = self.norm, None
    try:
        out = _ENCODER_FORWARD(self, src, mask, src_key_padding_mask, is_causal)
    finally:
        self.norm = norm
    pad = src_key_padding_mask
    valid = pad.logical_not() if pad.dtype == torch.bool else pad == 0
    padded = valid.logical_not()
    if getattr(self, "mask_check", True):  # nested only if no row has a token after padding
        aligned = (valid[:, 1:] <= valid[:, :-1]).all()
        padded = padded & aligned
    out = out.masked_fill(padded[..., None], 0.0)
    return out if norm is None else norm(out)


_ENCODER_FORWARD = torch.nn.TransformerEncoder.forward


@contextlib.contextmanager
def _eager_transformers():
    """PyTorch's transformer modules traced as eager runs them: the encoder's nested-tensor
    path (``_encoder_forward``), and a mask's causality (a hint: the mask is applied either
    way) taken as not known, where its check would guard on the mask's values."""
    import torch.nn.modules.transformer as transformer

    detect = transformer._detect_is_causal_mask
    torch.nn.TransformerEncoder.forward = _encoder_forward
    transformer._detect_is_causal_mask = lambda mask, is_causal=None, size=None: \
        is_causal is True
    try:
        yield
    finally:
        torch.nn.TransformerEncoder.forward = _ENCODER_FORWARD
        transformer._detect_is_causal_mask = detect


def _export(model: torch.nn.Module, inputs: list) -> torch.export.ExportedProgram:
    try:
        with _quiet(), _eager_transformers():
            return torch.export.export(model, tuple(inputs), strict=False)
    except UnsupportedOperatorError:
        raise
    except Exception as exc:  # data-dependent control flow, unsupported Python, ...
        first = (str(exc).strip().splitlines() or [""])[0][:300]
        raise UnsupportedOperatorError(
            "forward", 0, "", f"torch.export cannot capture forward(): {type(exc).__name__}: "
            f"{first}") from exc


def _rewrite(program: torch.export.ExportedProgram, model: torch.nn.Module,
             inputs: list, lines: list[str]) -> fx.GraphModule:
    """The exported graph, functionalised (in-place ops and views written back become pure
    ops, so no lowering sees aliasing), with our targets; ops that map to nothing are
    decomposed first."""
    table: dict = {}
    for _ in range(MAX_DECOMPOSITION_ROUNDS):
        with _quiet():
            program = program.run_decompositions(table)
        table = _decompositions({n.target for n in program.graph.nodes
                                 if n.op == "call_function" and not maps(_name(n.target))
                                 and n.target is not operator.getitem})
        if not table:
            break
    return _torch_graph(program, model, inputs, lines)


def _decompositions(ops: set) -> dict:
    """PyTorch's decompositions of ``ops`` alone (the other ops stay as they are)."""
    table = torch.export.default_decompositions()
    return {op: table[op] for op in ops if isinstance(op, torch._ops.OpOverload) and op in table}


def _torch_graph(program: torch.export.ExportedProgram, model: torch.nn.Module,
                 inputs: list, lines: list[str]) -> fx.GraphModule:
    graph, env, attrs = fx.Graph(), {}, {}
    specs = {s.arg.name: s for s in program.graph_signature.input_specs
             if hasattr(s.arg, "name")}
    nodes = list(program.graph.nodes)
    names = _input_names(program, model, inputs)
    for node in nodes:
        if node.op == "placeholder":
            env[node] = _input(graph, node, specs.get(node.name), program, attrs, names)
    params = list(inspect.signature(model.forward).parameters)
    for name in params[len(inputs):]:  # left to their defaults: ``Captured.defaults``
        graph.placeholder(name)
    first_only: set[fx.Node] = set()
    for node in nodes:
        if node.op == "call_function":
            env[node] = _call(graph, node, env, first_only, lines)
        elif node.op == "output":
            graph.output(_outputs(program, node, env))
    graph.eliminate_dead_code()
    root = dict(attrs)
    for target in {n.target for n in graph.nodes if n.op == "get_attr"} - set(root):
        root[target] = _model_tensor(model, target)
    return fx.GraphModule(root, graph)


def _input_names(program: torch.export.ExportedProgram, model: torch.nn.Module,
                 inputs: list) -> dict[str, str]:
    """The exported user inputs' placeholder names, each to its ``forward`` parameter's name
    (``ModelNew.forward`` keeps those). The export flattens inputs that are lists or dicts of
    tensors into several; those are refused."""
    users = [s.arg.name for s in program.graph_signature.input_specs
             if s.kind == InputKind.USER_INPUT]
    if len(users) != len(inputs):
        raise UnsupportedOperatorError(
            "forward", 0, "", "forward inputs that are lists, tuples or dicts of tensors")
    return dict(zip(users, inspect.signature(model.forward).parameters, strict=False))


def _input(graph: fx.Graph, node: fx.Node, spec, program, attrs: dict,
           names: dict[str, str]) -> fx.Node:
    kind = spec.kind if spec is not None else InputKind.USER_INPUT
    if kind in (InputKind.PARAMETER, InputKind.BUFFER):
        new = graph.get_attr(spec.target)
    elif kind == InputKind.CONSTANT_TENSOR:
        name = f"_tensor_constant{len(attrs)}"
        attrs[name] = program.constants[spec.target]
        new = graph.get_attr(name)
    elif kind == InputKind.USER_INPUT:
        new = graph.placeholder(names[node.name])
    else:
        raise UnsupportedOperatorError("forward", 0, "", f"exported input of kind {kind.name}")
    _copy_meta(node, new)
    return new


def _model_tensor(model: torch.nn.Module, target: str) -> torch.Tensor:
    try:
        return model.get_parameter(target)
    except AttributeError:
        return model.get_buffer(target)


def _copy_meta(old: fx.Node, new: fx.Node) -> None:
    new.meta["stack_trace"] = old.meta.get("stack_trace")
    val = old.meta.get("val")
    if isinstance(val, torch.Tensor):
        new.meta["tensor_meta"] = _extract_tensor_metadata(val)
    elif isinstance(val, list | tuple) and all(isinstance(v, torch.Tensor) for v in val):
        new.meta["tensor_meta"] = tuple(_extract_tensor_metadata(v) for v in val)


def _call(graph: fx.Graph, node: fx.Node, env: dict, first_only: set,
          lines: list[str]) -> fx.Node:
    name = _name(node.target)
    args = fx.node.map_arg(node.args, lambda n: env[n])
    kwargs = fx.node.map_arg(node.kwargs, lambda n: env[n])
    if node.target is operator.getitem and args[0] in first_only:
        if args[1] == 0:
            return args[0]
        call: Call = ("call_function", unavailable, (f"output {args[1]} of {args[0].name}",),
                      {}, False)
    elif name in IDENTITY_OPS or _inactive_dropout(name, node, args):
        return args[0]
    elif name in CHECK_OPS:
        return None
    else:
        _refuse_random(node, lines)
        call = _translate(node, args, kwargs) or (
            "call_function", node.target, args, kwargs, False)  # refused when lowered
    op, target, new_args, new_kwargs, first = call
    new = graph.create_node(op, target, new_args, new_kwargs, name=node.name)
    _copy_meta(node, new)
    if first:
        first_only.add(new)
        meta = new.meta.get("tensor_meta")
        if isinstance(meta, tuple):
            new.meta["tensor_meta"] = meta[0]
    return new


DROPOUTS = ("dropout", "native_dropout", "alpha_dropout", "feature_dropout",
            "feature_alpha_dropout")


def _inactive_dropout(name: str, node: fx.Node, args: tuple) -> bool:
    """Dropout in eval mode or with p = 0: the identity (``native_dropout``'s mask unused)."""
    if name not in DROPOUTS:
        return False
    named = _named(node.target, args, {})
    return named.get("train") is False or named.get("p") == 0


def _refuse_random(node: fx.Node, lines: list[str]) -> None:
    """Refuse an op that draws random numbers (ATen tags it ``nondeterministic_seeded``); an
    attention whose ``dropout_p`` is 0, or an op told ``training=False``, draws none."""
    op = node.target
    if not (isinstance(op, torch._ops.OpOverload)
            and torch.Tag.nondeterministic_seeded in op.tags):
        return
    defaults = {a.name: a.default_value for a in op._schema.arguments if a.has_default_value()}
    named = defaults | _named(op, node.args, node.kwargs)
    if named.get("dropout_p", 1.0) == 0 or named.get("training", True) is False:
        return  # attention without dropout; rrelu in eval mode (its slope is fixed)
    line, text = node_line(node, lines)
    raise UnsupportedOperatorError(
        f"aten.{_name(op)}", line, text, "draws random numbers in forward: a candidate cannot "
        "repeat the reference's draws")


def _outputs(program: torch.export.ExportedProgram, node: fx.Node, env: dict):
    """The forward's own outputs, in its structure (buffer updates dropped)."""
    kinds = [s.kind for s in program.graph_signature.output_specs]
    flat = [env[v] if isinstance(v, fx.Node) else v
            for v, kind in zip(node.args[0], kinds, strict=True) if kind == OutputKind.USER_OUTPUT]
    spec = program.call_spec.out_spec
    return torch.utils._pytree.tree_unflatten(flat, spec) if spec is not None else tuple(flat)


def _name(target) -> str:
    return target._opname if isinstance(target, torch._ops.OpOverload) else ""


def _translate(node: fx.Node, args: tuple, kwargs: dict) -> Call | None:
    """``node``'s ATen call (on the rewritten graph's ``args``) as a call with a lowering, or
    None when there is none."""
    if node.target is operator.getitem:
        return ("call_function", operator.getitem, args, {}, False)
    name = _name(node.target)
    if not name:
        return None
    kwargs = dict(kwargs)
    for key in DROPPED_KWARGS:
        kwargs.pop(key, None)
    adapter = ADAPTERS.get(name)
    if adapter is not None:
        return adapter(_named(node.target, args, kwargs))
    return _same_schema(name, args, kwargs)


def _same_schema(name: str, args: tuple, kwargs: dict):
    """A ``torch`` function or tensor method of the op's name: both are generated from ATen's
    own schema, so the arguments carry over as they are; then the private modules behind
    ``torch.nn.functional`` and ``torch.linalg``, and ``torch.nn.functional`` itself last (its
    Python functions may order arguments differently; ``F.unfold`` is not ``Tensor.unfold``)."""
    fn = getattr(torch, name, None)
    if fn is not None and fn in FUNCTIONS:
        return ("call_function", fn, args, kwargs, False)
    if name in METHODS:
        return ("call_method", name, args, kwargs, False)
    fn = _python_function(name)
    return None if fn is None else ("call_function", fn, args, kwargs, False)


def maps(name: str) -> bool:
    """Whether the ATen op ``name`` (an overload packet's name, ``add``) maps onto a lowering
    here, by an adapter or by its name (``compiler.coverage``)."""
    return (name in ADAPTERS or name in IDENTITY_OPS or name in CHECK_OPS or name in DROPOUTS
            or _same_schema(name, (), {}) is not None)


def _python_function(name: str):
    for home in PYTHON_HOMES:
        fn = getattr(home, name, None)
        if fn is not None and fn in FUNCTIONS:
            return fn
    return None


# ------------------------------------------------------------ adapters (ATen schema -> Python)


def _as(target: Callable, rename: dict | None = None, fixed: dict | None = None,
        first_only: bool = False, convert: Callable[[dict], dict] | None = None):
    """An adapter calling the Python function ``target`` with the ATen op's arguments matched by
    name (``self`` is its first parameter; ``rename`` maps other ATen names to its names),
    positionally in ``target``'s order, as a program would write the call: the lowerings take
    the Python signatures. ``first_only``: ``target`` returns the first ATen output alone."""
    params = [p for p in inspect.signature(target).parameters.values()
              if p.kind is not inspect.Parameter.VAR_KEYWORD]

    def adapt(named: dict) -> Call | None:
        named = {(rename or {}).get(k, k): v for k, v in named.items()} | (fixed or {})
        named[params[0].name] = named.pop("self", named.get(params[0].name))
        if isinstance(named.get("reduction"), int):
            named["reduction"] = REDUCTIONS[named["reduction"]]
        named = convert(named) if convert else named
        values, last = [], 0
        for i, p in enumerate(params):
            if p.name in named:
                values.append(named[p.name])
                last = i + 1
            elif p.default is inspect.Parameter.empty:
                return None
            else:
                values.append(p.default)
        return ("call_function", target, tuple(values[:last]), {}, first_only)

    return adapt


def _named(op: torch._ops.OpOverload, args: tuple, kwargs: dict) -> dict:
    names = [a.name for a in op._schema.arguments]
    return dict(zip(names, args, strict=False)) | kwargs


def _index(named: dict) -> Call:
    key = tuple(slice(None) if i is None else i for i in named["indices"])
    return ("call_function", operator.getitem, (named["self"], key), {}, False)


def _slice(named: dict) -> Call:
    x, dim = named["self"], named.get("dim", 0)
    meta = x.meta.get("tensor_meta") if isinstance(x, fx.Node) else None
    dim = dim % len(meta.shape) if meta is not None and hasattr(meta, "shape") else dim
    part = slice(named.get("start"), named.get("end"), named.get("step", 1))
    return ("call_function", operator.getitem, (x, (slice(None),) * dim + (part,)), {}, False)


def _call_of(target, *args, **kwargs) -> Call:
    return ("call_function", target, args, kwargs, False)


def _pad(mode: str) -> Callable[[dict], Call]:
    return lambda named: _call_of(F.pad, named["self"], named["padding"], mode)


def _upsample(mode: str) -> Callable[[dict], Call | None]:
    rename = {"output_size": "size", "scale_factors": "scale_factor"}
    return _as(F.interpolate, rename, {"mode": mode})


def _no_padding_index(named: dict) -> dict:
    return named | {"padding_idx": None if named.get("padding_idx", -1) < 0
                    else named["padding_idx"]}


def _convolution(named: dict) -> Call:
    """``aten.convolution`` (core ATen's one convolution) as the ``F`` call of its rank."""
    x, weight = named["input"], named["weight"]
    rank = len(weight.meta["tensor_meta"].shape) - 2
    common = (x, weight, named["bias"], named["stride"], named["padding"])
    if named["transposed"]:
        target = getattr(F, f"conv_transpose{rank}d")
        args = (*common, named["output_padding"], named["groups"], named["dilation"])
    else:
        target = getattr(F, f"conv{rank}d")
        args = (*common, named["dilation"], named["groups"])
    return ("call_function", target, args, {}, False)


def _no_stats(named: dict) -> dict:
    return {"running_mean": None, "running_var": None} | named


ADAPTERS: dict[str, Callable[[dict], Call | None]] = {
    "batch_norm": _as(F.batch_norm),
    "_native_batch_norm_legit_functional": _as(F.batch_norm, first_only=True),
    "_native_batch_norm_legit_no_training": _as(F.batch_norm, fixed={"training": False},
                                                first_only=True),
    "_native_batch_norm_legit": _as(F.batch_norm, first_only=True, convert=_no_stats),
    "instance_norm": _as(F.instance_norm),
    "layer_norm": _as(F.layer_norm),
    "native_layer_norm": _as(F.layer_norm, first_only=True),
    "group_norm": _as(F.group_norm),
    "native_group_norm": _as(F.group_norm, {"group": "num_groups"}, first_only=True),
    "embedding": _as(F.embedding, {"indices": "input"}, convert=_no_padding_index),
    "_to_copy": lambda named: ("call_method", "to", (named["self"],), {
        "dtype": named["dtype"]}, False) if named.get("dtype") else _call_of(
        torch.clone, named["self"]),
    # uninitialised memory: any values are PyTorch's; zeros are what a program may rely on least
    **{name: lambda named: _call_of(torch.zeros, named["size"], dtype=named.get("dtype"))
       for name in ("empty", "empty_permuted", "empty_strided")},
    "empty_like": lambda named: _call_of(torch.zeros_like, named["self"],
                                         dtype=named.get("dtype")),
    # a functional copy into ``self``: ``src`` broadcast to its shape (the node's own dtype
    # casts it); what an assignment into a slice (``out[:, 0] = 0``) leaves after export
    "copy": lambda named: ("call_method", "expand_as", (named["src"], named["self"]), {}, False),
    "affine_grid_generator": lambda named: _call_of(
        F.affine_grid, named["theta"], named["size"], align_corners=named["align_corners"]),
    "grid_sampler_2d": lambda named: _call_of(
        F.grid_sample, named["input"], named["grid"],
        mode=("bilinear", "nearest", "bicubic")[named["interpolation_mode"]],
        padding_mode=("zeros", "border", "reflection")[named["padding_mode"]],
        align_corners=named["align_corners"]),
    "bitwise_and": lambda named: _call_of(operator.and_, named["self"], named["other"]),
    "bitwise_or": lambda named: _call_of(operator.or_, named["self"], named["other"]),
    "convolution": _convolution,
    **{f"_adaptive_avg_pool{d}d": lambda named, d=d: _call_of(
        getattr(F, f"adaptive_avg_pool{d}d"), named["self"], named["output_size"])
       for d in (2, 3)},
    "_softmax": lambda named: _call_of(torch.softmax, named["self"], named["dim"]),
    "_log_softmax": lambda named: _call_of(torch.log_softmax, named["self"], named["dim"]),
    "einsum": lambda named: _call_of(torch.einsum, named["equation"], *named["tensors"]),
    **{f"adaptive_max_pool{d}d": lambda named, d=d: (
        "call_function", getattr(F, f"adaptive_max_pool{d}d"),
        (named["self"], named["output_size"]), {}, True) for d in (1, 2, 3)},
    "split_with_sizes": lambda named: ("call_method", "split", (
        named["self"], named["split_sizes"], named.get("dim", 0)), {}, False),
    "index": _index,
    "slice": _slice,
    "scalar_tensor": lambda named: _call_of(torch.full, [], named["s"],
                                            dtype=named.get("dtype") or torch.float32),
    "constant_pad_nd": lambda named: _call_of(F.pad, named["self"], named["pad"], "constant",
                                              named.get("value", 0.0)),
    **{f"reflection_pad{d}d": _pad("reflect") for d in (1, 2, 3)},
    **{f"replication_pad{d}d": _pad("replicate") for d in (1, 2, 3)},
    **{f"upsample_nearest{d}d": _upsample("nearest") for d in (1, 2, 3)},
    **{f"_upsample_nearest_exact{d}d": _upsample("nearest-exact") for d in (1, 2, 3)},
    "upsample_linear1d": _upsample("linear"),
    "upsample_bilinear2d": _upsample("bilinear"),
    "upsample_trilinear3d": _upsample("trilinear"),
    "upsample_bicubic2d": _upsample("bicubic"),
    "cross_entropy_loss": _as(F.cross_entropy),
    "nll_loss": _as(F.nll_loss),
    "nll_loss_nd": _as(F.nll_loss),
    "mse_loss": _as(F.mse_loss),
    "l1_loss": _as(F.l1_loss),
    "smooth_l1_loss": _as(F.smooth_l1_loss),
    "huber_loss": _as(F.huber_loss),
    "kl_div": _as(F.kl_div),
    "binary_cross_entropy": _as(F.binary_cross_entropy),
    "binary_cross_entropy_with_logits": _as(F.binary_cross_entropy_with_logits),
    "hinge_embedding_loss": _as(F.hinge_embedding_loss),
    "triplet_margin_loss": _as(F.triplet_margin_loss),
    # kept whole: PyTorch's decomposition also counts the labels after the first -1
    "multilabel_margin_loss": _as(F.multilabel_margin_loss),
    "multilabel_margin_loss_forward": _as(F.multilabel_margin_loss, first_only=True),
}
