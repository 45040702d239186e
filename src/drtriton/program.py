"""KernelBench-format programs: load one from source text and run it.

A program is Python source that defines ``class Model(nn.Module)``, ``get_inputs()`` and
``get_init_inputs()``; a candidate defines ``ModelNew`` with the same constructor. This module only
loads *trusted* sources (the project's own references); untrusted candidates run only inside the
judge's sandbox (``drtriton.judge``).

It also holds the process-wide locks that keep threads of one process apart where CPython or
torch share state between them: ``TORCH_STATE_LOCK`` (fx patches, default RNG) and the parser's.
"""

from __future__ import annotations

import ast
import contextlib
import linecache
import random
import sys
import threading
import types
from collections.abc import Iterable, Iterator, Mapping, Sequence

import torch

REQUIRED_NAMES = ("Model", "get_inputs", "get_init_inputs")

# torch keeps state process-wide that two threads of this process must not use at once:
# - torch.fx's symbolic tracer patches Module.__call__ and torch functions globally while it
#   traces; another thread's eager run fails ("module is not installed as a submodule": the judge
#   called a valid reference invalid while the bench compiled the next problem);
# - the default random generators: a draw in one thread moves another thread's seeded stream (the
#   judge rejected a correct candidate because the sandbox's inputs "differ" from its own).
# Every fx trace, every seeded draw and every eager reference run in the project holds this lock.
# Re-entrant, so a traced function may seed and build a model inside it.
TORCH_STATE_LOCK = threading.RLock()


# CPython 3.11 keeps the AST constructor's recursion depth per interpreter, not per thread: two
# threads in ast.parse at once (a CPU bench with two judge slots: one compiling, one checking a
# candidate) failed with "SystemError: AST constructor recursion depth mismatch". Every parse in
# the project goes through parse_python.
_AST_LOCK = threading.Lock()


def parse_python(source: str, mode: str = "exec") -> ast.AST:
    """``ast.parse`` under the process-wide lock that keeps parses in different threads apart."""
    with _AST_LOCK:
        return ast.parse(source, mode=mode)


class ProgramError(ValueError):
    """The source is not a valid KernelBench-format program."""


@contextlib.contextmanager
def importable(module: types.ModuleType) -> Iterator[None]:
    """``module`` in ``sys.modules`` while its source runs (then whatever held its name before):
    ``dataclasses`` looks a class's module up there, so a program that defines a dataclass
    could not be loaded without it."""
    name = module.__name__
    before = sys.modules.get(name)
    sys.modules[name] = module
    try:
        yield
    finally:
        if before is None:
            sys.modules.pop(name, None)
        else:
            sys.modules[name] = before


def load_program(source: str, name: str = "program") -> types.ModuleType:
    """Execute trusted program source in a fresh module and check its KernelBench names."""
    module = types.ModuleType(name)
    module.__file__ = f"<{name}>"
    # its lines where ``inspect.getsource`` looks (TorchScript compiles ``@torch.jit.script``
    # helpers from their source; without them the program could not be loaded)
    linecache.cache[module.__file__] = (len(source), None, source.splitlines(True), module.__file__)
    try:
        code = compile(source, f"<{name}>", "exec")
        with importable(module):
            exec(code, module.__dict__)
    except Exception as exc:  # report any failure as a program error, with its cause
        raise ProgramError(f"{name}: cannot execute source: {type(exc).__name__}: {exc}") from exc
    missing = [n for n in REQUIRED_NAMES if n not in module.__dict__]
    if missing:
        raise ProgramError(f"{name}: missing {', '.join(missing)} (KernelBench format)")
    return module


def as_output_tuple(output: object) -> tuple[torch.Tensor, ...]:
    """Normalise a forward() result to a tuple of tensors."""
    if isinstance(output, torch.Tensor):
        return (output,)
    if isinstance(output, Sequence) and all(isinstance(t, torch.Tensor) for t in output):
        return tuple(output)
    if isinstance(output, Sequence):
        i, bad = next((i, t) for i, t in enumerate(output) if not isinstance(t, torch.Tensor))
        raise ProgramError(f"forward() must return a tensor or a flat tuple of tensors: its "
                           f"output {i} is a {type(bad).__name__} (return its tensors in one "
                           "tuple)")
    raise ProgramError(f"forward() must return a tensor or a flat tuple of tensors, got a "
                       f"{type(output).__name__}")


def make_inputs(module: types.ModuleType, seed: int, device: torch.device | str) -> list:
    """The program's inputs under ``seed``, drawn directly on ``device``.

    The judge and its sandboxed children call this with the same seed on the same GPU and get
    the same values, so GPU-scale inputs (GBs) are made where they are used instead of crossing
    processes through files; the judge checks that they agree (``worker.fingerprint``).
    """
    with TORCH_STATE_LOCK, torch.device(device):
        random.seed(seed)
        torch.manual_seed(seed)
        values = input_list(module.get_inputs())
    return [x.to(device) if isinstance(x, torch.Tensor) else x for x in values]


def input_list(values: object) -> list:
    """``get_inputs()``'s result as a list; a ``ProgramError`` unless it is a list, tuple or other
    iterable of inputs (a string would pass as a list of characters)."""
    if isinstance(values, (str, bytes, Mapping)) or not isinstance(values, Iterable):
        raise ProgramError(
            f"get_inputs() must return a list of inputs, got {type(values).__name__}"
        )
    return list(values)


def run_program(
    module: types.ModuleType, seed: int, device: torch.device | str = "cpu"
) -> tuple[list[torch.Tensor], tuple[torch.Tensor, ...]]:
    """Build ``Model`` and inputs under ``seed`` (as KernelBench does) and run it once."""
    with TORCH_STATE_LOCK:
        torch.manual_seed(seed)
        init_inputs = module.get_init_inputs()
        model = module.Model(*init_inputs).to(device)
        torch.manual_seed(seed + 1)
        inputs = [x.to(device) if isinstance(x, torch.Tensor) else x
                  for x in input_list(module.get_inputs())]
        with torch.no_grad():
            outputs = as_output_tuple(model(*inputs))
    return inputs, outputs


def check_runs(source: str, device: str = "cpu", seed: int = 0) -> dict:
    """Run a program once as the judge does and name what fails in the program's own terms:
    ``{"problem": "forward() raised ..."}``, or ``{}`` when it runs. It executes the program:
    untrusted sources go through a sandbox (``JudgePool.call(source, "drtriton.program:check_runs",
    ...)``)."""
    try:
        module = load_program(source)
        with TORCH_STATE_LOCK:
            torch.manual_seed(seed)
            init = _step("get_init_inputs()", module.get_init_inputs)
            model = _step("Model(*get_init_inputs())", lambda: module.Model(*init).to(device))
            inputs = _step("get_inputs()", lambda: make_inputs(module, seed + 1, device))
            with torch.no_grad():
                as_output_tuple(_step("forward()", lambda: model(*inputs)))
    except ProgramError as exc:
        return {"problem": str(exc)}
    return {}


def _step(what: str, call):
    try:
        return call()
    except ProgramError:
        raise
    except Exception as exc:  # the program's own failure: reported, never a traceback
        raise ProgramError(f"{what} raised {type(exc).__name__}: {exc}") from exc
