"""Run-time checks inside the candidate process: Triton launches and PyTorch compute in forward.

Installed by the worker *before* the candidate is imported:

* every Triton launch goes through ``JITFunction.run`` (compiled) or ``InterpretedFunction.run``
  (``TRITON_INTERPRET=1``); both are wrapped at class level to count launches and to mark the time
  spent inside a launch (the interpreter itself touches tensors with aten ops);
* a ``TorchDispatchMode`` active during ``forward`` records every aten op outside launches that is
  not allocation, a view, a same-dtype copy or metadata (plus the hybrid allow-list);
* a ``TorchFunctionMode`` records host escapes (``.numpy()``, ``.tolist()``, ``.item()``) that would
  let a candidate compute with numpy or Python instead.

A candidate can tamper with anything in its own process, so these are defence in depth: the worker
also reports whether the hooks and modes were still in place, and the judge treats a missing or
inconsistent report as a rejection. Outputs are compared in the judge's own process.
"""

from __future__ import annotations

import contextlib
import sys
from collections import Counter
from collections.abc import Iterator

import torch
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode

# Allocation, views, copies, fills and metadata: allowed anywhere in forward (aten packet names).
ALLOWED_OPS = frozenset(
    """
    empty empty_like empty_strided new_empty new_empty_strided empty_permuted
    zeros zeros_like ones ones_like full full_like new_zeros new_ones new_full fill_ zero_
    view _unsafe_view reshape _reshape_alias as_strided expand expand_as permute transpose t
    squeeze unsqueeze slice select alias detach contiguous clone copy_ _to_copy to lift_fresh
    resize_ split split_with_sizes chunk unbind narrow flatten unflatten view_as movedim
    sym_size sym_stride sym_numel sym_storage_offset is_contiguous size stride numel dim
    record_stream set_ _local_scalar_dense_meta is_same_size is_nonzero_meta
    resolve_conj resolve_neg lift_fresh_copy view_as_real view_as_complex
    """.split()
)
# Ops that copy; they count as compute when they change the dtype (reduced precision).
CASTING_OPS = frozenset({"_to_copy", "copy_", "to"})
HOST_ESCAPES = frozenset({"numpy", "tolist", "item", "__array__"})


class Monitor:
    """Counts launches and forbidden ops while ``watch()`` is active. One per candidate process."""

    def __init__(self, hybrid_allow: tuple[str, ...] = ()) -> None:
        self.hybrid_allow = frozenset(hybrid_allow)
        self.active = False
        self.exiting = False
        self.in_launch = 0
        self.launches = 0
        self.forbidden: Counter[str] = Counter()
        self.host_escapes: Counter[str] = Counter()
        self.tampered: list[str] = []
        self._wrappers: dict[type, object] = {}

    # ---- launch hooks -------------------------------------------------------------------
    def install(self) -> None:
        """Wrap the run method of every Triton launcher class present in this triton."""
        from triton.runtime.jit import JITFunction

        classes: list[type] = [JITFunction]
        with contextlib.suppress(ImportError):
            from triton.runtime.interpreter import InterpretedFunction

            classes.append(InterpretedFunction)
        for cls in classes:
            wrapper = self._wrap(cls.run)
            cls.run = wrapper
            self._wrappers[cls] = wrapper
        for name in ("_pop_torch_dispatch_stack", "_pop_torch_function_stack"):
            self._guard_pop(name)

    def _guard_pop(self, name: str) -> None:
        """Flag a candidate that pops our modes off the stack while forward runs."""
        original = getattr(torch._C, name)
        monitor = self

        def guarded(*args, **kwargs):
            if monitor.active and not monitor.in_launch and not monitor.exiting:
                monitor.tampered.append(f"{name} called during forward")
            return original(*args, **kwargs)

        # Rebind it wherever torch imported it by name (e.g. torch.utils._python_dispatch).
        for module in list(sys.modules.values()):
            if getattr(module, name, None) is original and module.__name__.startswith("torch"):
                setattr(module, name, guarded)

    def _wrap(self, original):
        monitor = self

        def run(fn_self, *args, **kwargs):
            if kwargs.get("warmup") or not monitor.active:
                return original(fn_self, *args, **kwargs)
            monitor.in_launch += 1
            try:
                kernel = original(fn_self, *args, **kwargs)
            finally:
                monitor.in_launch -= 1
            monitor.launches += 1
            return kernel

        run._drtriton_monitor = True  # lets hooks_intact() recognise its own wrapper
        return run

    def hooks_intact(self) -> bool:
        return all(getattr(cls, "run", None) is w for cls, w in self._wrappers.items())

    # ---- forward watch ------------------------------------------------------------------
    @contextlib.contextmanager
    def watch(self) -> Iterator[None]:
        """Active around one forward call; records what forward did."""
        from torch.utils._python_dispatch import _get_current_dispatch_mode

        dispatch_mode = _OpRecorder(self)
        function_mode = _EscapeRecorder(self)
        self.active = True
        try:
            with function_mode, dispatch_mode:
                try:
                    yield
                    # Still ours on top? A candidate that popped it may have computed unseen.
                    if _get_current_dispatch_mode() is not dispatch_mode:
                        self.tampered.append("dispatch mode removed during forward")
                finally:
                    self.exiting = True  # our own exits pop the modes legitimately
        finally:
            self.active = False
            self.exiting = False
        if not self.hooks_intact():
            self.tampered.append("Triton launch hook replaced")

    def record_op(self, func, args, kwargs) -> None:
        name = func.overloadpacket.__name__
        if name in CASTING_OPS and _changes_dtype(name, args, kwargs):
            self.forbidden[f"{name}(dtype change)"] += 1
        elif name not in ALLOWED_OPS and name not in self.hybrid_allow:
            self.forbidden[name] += 1

    def report(self) -> dict:
        return {
            "launches": self.launches,
            "forbidden_ops": dict(self.forbidden),
            "host_escapes": dict(self.host_escapes),
            "tampered": list(self.tampered),
        }


def _changes_dtype(name: str, args, kwargs) -> bool:
    kwargs = kwargs or {}
    if name == "copy_" and len(args) >= 2:
        return args[0].dtype != args[1].dtype
    src = args[0] if args else None
    dtype = kwargs.get("dtype")
    return isinstance(src, torch.Tensor) and dtype is not None and dtype != src.dtype


class _OpRecorder(TorchDispatchMode):
    def __init__(self, monitor: Monitor) -> None:
        super().__init__()
        self.monitor = monitor

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if not self.monitor.in_launch:
            self.monitor.record_op(func, args, kwargs)
        return func(*args, **(kwargs or {}))


class _EscapeRecorder(TorchFunctionMode):
    def __init__(self, monitor: Monitor) -> None:
        super().__init__()
        self.monitor = monitor

    def __torch_function__(self, func, types, args=(), kwargs=None):
        name = getattr(func, "__name__", "")
        if not self.monitor.in_launch and name in HOST_ESCAPES:
            self.monitor.host_escapes[name] += 1
        return func(*args, **(kwargs or {}))
