"""What the compiler converts, read from its dispatch tables (``drtriton ops --coverage``).

The compiler captures programs with ``torch.fx`` at the level of PyTorch's Python API, and
with ``torch.export`` at the level of ATen ops (``capture="auto"`` tries fx first), so the
report is in both terms: ``nn`` modules, ``torch.nn.functional`` functions, ``torch`` functions,
tensor methods, and ATen ops (the core ATen opset and every op the export capture maps). Each is

* ``lowered``: a lowering of its own (``compiler.lowerings``);
* ``view``: a view the compiler folds into the indexing of the kernels that read it;
* ``traced``: an ``nn`` module without a lowering of its own, whose ``forward`` the capture
  traces into: it converts when everything it calls does;
* ``decomposed``: an ATen op without a mapping of its own that PyTorch decomposes: it converts
  when the ops of its decomposition do;
* ``unsupported``: converting a program that calls it fails with an error naming it.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass

import torch

STATUSES = ("lowered", "view", "traced", "decomposed", "unsupported")
KINDS = ("nn module", "nn.functional", "torch function", "tensor method", "aten op")


@dataclass(frozen=True)
class Coverage:
    kind: str  # one of KINDS
    name: str  # as a program spells it: nn.Linear, F.gelu, torch.cumsum, Tensor.masked_fill
    status: str  # one of STATUSES


def coverage() -> list[Coverage]:
    """Every public ``nn`` module and ``nn.functional`` function, and every ``torch`` function and
    tensor method the compiler lowers or folds as a view, with its status."""
    import drtriton.compiler.lowerings  # noqa: F401 - fills the tables
    from drtriton.compiler.lower import FUNCTIONS, METHODS, MODULES, VIEW_FUNCTIONS, VIEW_METHODS

    def status_of(fn) -> str:
        if fn in FUNCTIONS:
            return "lowered"
        return "view" if fn in VIEW_FUNCTIONS else "unsupported"

    rows = [Coverage("nn module", f"nn.{name}", "lowered" if cls in MODULES else "traced")
            for name, cls in _public_modules()]
    functional = torch.nn.functional
    rows += [Coverage("nn.functional", f"F.{name}", status_of(getattr(functional, name)))
             for name in _public_functions(functional)]
    seen = {id(getattr(functional, n)) for n in _public_functions(functional)}
    named = {id(v): n for n in dir(torch) if not n.startswith("_")
             for v in [getattr(torch, n, None)] if callable(v)}
    for fn in [*FUNCTIONS, *VIEW_FUNCTIONS]:
        if id(fn) in named and id(fn) not in seen:
            rows.append(Coverage("torch function", f"torch.{named[id(fn)]}", status_of(fn)))
            seen.add(id(fn))
    rows += [Coverage("tensor method", f"Tensor.{name}", "lowered") for name in METHODS]
    rows += [Coverage("tensor method", f"Tensor.{name}", "view")
             for name in VIEW_METHODS if name not in METHODS]
    rows += _aten_rows()
    return sorted(set(rows), key=lambda r: (KINDS.index(r.kind), r.name))


def _aten_rows() -> list[Coverage]:
    """The core ATen opset, the ATen ops the export capture maps and those PyTorch
    decomposes, by overload packet."""
    from drtriton.compiler import aten_capture

    decomposable = {op.name().split("::")[-1].split(".")[0]
                    for op in torch.export.default_decompositions()
                    if isinstance(op, torch._ops.OpOverload)}
    rows = []
    for qualified in torch._C._dispatch_get_all_op_names():
        namespace, _, full = qualified.partition("::")
        name, _, overload = full.partition(".")
        if namespace != "aten" or "backward" in name:
            continue
        mapped = aten_capture.maps(name)
        if not (mapped or name in decomposable or _core(name, overload or "default")):
            continue
        status = ("lowered" if mapped else "decomposed" if name in decomposable
                  else "unsupported")
        rows.append(Coverage("aten op", f"aten.{name}", status))
    return rows


def _core(name: str, overload: str) -> bool:
    op = getattr(getattr(torch.ops.aten, name, None), overload, None)
    return isinstance(op, torch._ops.OpOverload) and torch.Tag.core in op.tags


def _public_modules() -> list[tuple[str, type]]:
    found = []
    for name in dir(torch.nn):
        cls = getattr(torch.nn, name)
        if (not name.startswith("_") and inspect.isclass(cls)
                and issubclass(cls, torch.nn.Module) and cls is not torch.nn.Module
                and cls.__module__.startswith("torch.nn.modules")
                and not name.startswith("Lazy")):
            found.append((name, cls))
    return found


# torch.nn.functional's own machinery, not operators a program calls
_HELPERS = ("has_torch_function", "handle_torch_function", "boolean_dispatch", "assert_int_")


def _public_functions(module) -> list[str]:
    return [n for n in dir(module) if not n.startswith(("_", *_HELPERS)) and n[0].islower()
            and callable(getattr(module, n)) and not inspect.ismodule(getattr(module, n))
            and not inspect.isclass(getattr(module, n))]


def counts(rows: list[Coverage]) -> dict[str, dict[str, int]]:
    """Per kind, how many of each status."""
    table: dict[str, dict[str, int]] = {k: dict.fromkeys(STATUSES, 0) for k in KINDS}
    for row in rows:
        table[row.kind][row.status] += 1
    return table
