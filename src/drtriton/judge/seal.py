"""What keeps a candidate in its child process from reaching the judge's own code and records.

Installed by the worker after its trusted setup and before the candidate is imported (in this
order, each step unreachable from the candidate once done):

1. ``scrub`` takes the C entry points that can stop, restart or bypass the C++ op record
   (``torch.autograd`` profiler control, RecordFunction switches, ``redispatch``, direct kernel
   calls, aten kernel registration, the Python dispatcher) out of every module and class that
   holds them, leaving stubs that report the attempt and raise. The worker keeps the originals
   it needs as local variables.
2. ``install_audit_hook`` adds a CPython audit hook, which cannot be removed. It blocks (raises)
   and records every way from candidate code to the judge's frames or objects: frame access
   (``sys._getframe``, ``tb_frame``, ``gi_frame``, ...), ``gc`` walks, tracing and profiling
   hooks, ``ctypes``, ``/proc/<pid>/mem``, process creation (but the compiler tools Triton runs),
   and any file operation on the child's result files. The record lives in the hook's closure;
   the hook itself is referenced only by the interpreter.

Everything the worker relies on after that point is bound before the candidate runs (see
``worker.py``), runs with a private copy of ``builtins``, and is not reachable through
``sys.modules``; so patching a class, module or mode object found by an attribute walk changes
only the candidate's own view. Outside this process the OS sandbox (``isolation.py``) bounds
whatever an attacker with arbitrary memory access could still do.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable

TAMPER_EVENT = "drtriton.tamper"

# Audit events blocked outright once the candidate may run.
_BLOCKED = frozenset(
    {
        "gc.get_objects",
        "gc.get_referrers",
        "gc.get_referents",
        "sys._current_frames",
        "sys._current_exceptions",
        "sys.settrace",
        "sys.setprofile",
        "os.fork",
        "os.forkpty",
        "os.system",
        "pty.spawn",
    }
)
# Attribute reads that hand out a frame (and from it every caller's locals and globals).
_FRAME_ATTRIBUTES = frozenset({"tb_frame", "gi_frame", "cr_frame", "ag_frame", "f_back"})
# Programs the libraries run while they compile and launch (ptxas, the launcher's C compiler,
# ldconfig to find libcuda, `file` for platform.architecture(), objdump for
# ctypes.util.find_library); anything else a candidate starts is blocked.
_TOOLS = frozenset(
    {"ptxas", "ptxas-blackwell", "cuobjdump", "nvdisasm", "gcc", "cc", "clang", "g++", "c++",
     "ldconfig", "ldconfig.real", "x86_64-linux-gnu-gcc", "aarch64-linux-gnu-gcc", "file",
     "objdump", "uname"}
)
# Library code that looks at its caller's frame and hands out no frame (typing's TypeVar and
# generic aliases read the caller's module name; torch's lazy CUDA seeding keeps a formatted
# stack; logging notes a file and line): ``sys._getframe`` is allowed when one of these code
# objects calls it. Whole modules, or single functions as "module:qualified.name".
_FRAME_READERS = (
    "typing", "typing_extensions", "collections", "enum", "warnings", "dataclasses",
    "traceback:format_stack", "traceback:extract_stack", "traceback:print_stack",
    "logging:Logger.findCaller",
)
_FRAME_EVENTS = frozenset({"sys._getframe", "sys._getframemodulename"})
# Library code that reads ``tb_frame`` (and the like) of a traceback and hands out no frame:
# Triton drops its own code generator's frames from a kernel's CompilationError, so without
# this an honest kernel that fails to compile on a GPU would be judged a tamper attempt.
_FRAME_ATTRIBUTE_READERS = ("triton.compiler.compiler:filter_traceback",)
_PATH_EVENTS = frozenset(
    {"open", "os.rename", "os.link", "os.symlink", "os.remove", "os.rmdir", "os.mkdir",
     "os.truncate", "os.chmod", "os.chown", "os.utime", "os.listxattr", "os.setxattr",
     "os.removexattr", "shutil.copyfile", "shutil.copymode", "shutil.copystat", "shutil.move",
     "shutil.rmtree", "shutil.copytree"}
)


class SealViolation(PermissionError):
    """Raised by the audit hook: the operation is not allowed inside the judge's sandbox."""


def install_audit_hook(
    protected_paths: list[str],
    protected_fds: list[int],
    allowed_calls: frozenset[int] = frozenset(),
) -> Callable[[], list]:
    """Install the hook; return a function that lists what was blocked so far.

    ``protected_paths`` (absolute) are the child's result files: no file operation may name
    them. ``protected_fds`` are their open descriptors: they may not be memory-mapped.
    ``allowed_calls``: addresses of the foreign functions the worker itself calls through
    ``ctypes`` afterwards (the CUDA driver's VMM entry points that export its outputs); every
    other ``ctypes`` event is blocked.
    """
    protected = frozenset(os.path.realpath(p) for p in protected_paths)
    readers = _frame_reader_codes(_FRAME_READERS)
    attribute_readers = _frame_reader_codes(_FRAME_ATTRIBUTE_READERS)
    getframe = sys._getframe
    fds = frozenset(protected_fds)
    record: list[str] = []
    realpath, basename, isinstance_, str_, len_ = (
        os.path.realpath, os.path.basename, isinstance, str, len,
    )
    busy = [False]  # the hook's own calls (realpath) raise events too
    debug = os.environ.get("DRTRITON_SEAL_DEBUG") == "1"  # print where each block came from
    from traceback import format_stack

    def names_protected(args: tuple) -> bool:
        for arg in args[:2]:
            if isinstance_(arg, (str_, bytes)) and arg:
                path = arg.decode() if isinstance_(arg, bytes) else arg
                if path.startswith("/proc/") and path.endswith("/mem"):
                    return True
                if realpath(path) in protected:
                    return True
        return False

    def why_blocked(event: str, args: tuple) -> str | None:
        if event in _BLOCKED:
            return event
        if event in _FRAME_EVENTS:
            caller = getframe(2)  # 0 this function, 1 the hook, 2 whoever called sys._getframe
            if id(caller.f_code) in readers:
                return None
            return f"{event} from {caller.f_code.co_filename}:{caller.f_code.co_name}"
        if event == TAMPER_EVENT:
            return f"called {args[0] if args else 'a guarded function'}"
        if event == "ctypes.call_function" and args and args[0] in allowed_calls:
            return None
        if event.startswith("ctypes."):
            return event
        if event == "object.__getattr__" and len_(args) > 1 and args[1] in _FRAME_ATTRIBUTES:
            if id(getframe(2).f_code) in attribute_readers:  # 2: whoever read the attribute
                return None
            return f"read of {args[1]}"
        if event in _PATH_EVENTS and names_protected(args):
            return f"{event} of a judge file {args[0]!r}"
        if event == "mmap.__new__" and args and args[0] in fds:
            return "mmap of a judge file"
        if event in ("subprocess.Popen", "os.posix_spawn", "os.spawn", "os.exec"):
            program = args[0] if args and args[0] else (args[1][0] if len_(args) > 1 else "")
            program = basename(os.fsdecode(program)) if program else ""
            text = str_(args[:2])
            if program not in _TOOLS or any(basename(p) in text for p in protected):
                return f"{event} of {program!r}"
        return None

    def hook(event: str, args: tuple) -> None:
        if busy[0]:
            return
        busy[0] = True
        try:
            reason = why_blocked(event, args)
        finally:
            busy[0] = False
        if reason is not None:
            if debug:
                busy[0] = True
                print("[seal] blocked:", reason, "".join(format_stack(limit=40)), file=sys.stderr)
                busy[0] = False
            record.append(reason)
            raise SealViolation(f"not allowed in the judge's sandbox: {reason}")

    sys.addaudithook(hook)
    del hook  # the interpreter holds the only reference
    return lambda: list(record)


def _frame_reader_codes(entries: tuple[str, ...]) -> frozenset[int]:
    """ids of every code object (nested ones too) of the functions ``entries`` name (modules
    not imported yet are skipped: code loaded after the hook is never a reader)."""
    found: set[int] = set()

    def add(code) -> None:
        if id(code) in found:
            return
        found.add(id(code))
        for const in code.co_consts:
            if hasattr(const, "co_consts"):
                add(const)

    def visit(obj, depth: int = 0) -> None:
        code = getattr(obj, "__code__", None)
        if code is not None and hasattr(code, "co_consts"):
            add(code)
        elif isinstance(obj, type) and depth == 0:
            for member in vars(obj).values():
                visit(getattr(member, "__func__", member), 1)

    for entry in entries:
        name, _, qualified = entry.partition(":")
        module = sys.modules.get(name)
        if module is None:
            continue
        if not qualified:
            for value in vars(module).values():
                visit(value)
            continue
        target = module
        for part in qualified.split("."):
            target = getattr(target, part, None)
        if target is not None:
            visit(target, 1)
    return frozenset(found)


def _stub(name: str) -> Callable:
    def blocked(*args, **kwargs):
        sys.audit(TAMPER_EVENT, name)  # recorded by the hook, which raises
        raise SealViolation(f"not allowed in the judge's sandbox: {name}")

    blocked.__name__ = name.rsplit(".", 1)[-1]
    return blocked


def _guarded_entry_points() -> list[tuple[object, str]]:
    """(owner, attribute) of every C entry point that can stop or bypass the op record."""
    import torch

    autograd = torch._C._autograd
    names = [
        (autograd, n)
        for n in (
            "_enable_profiler", "_disable_profiler", "_prepare_profiler",
            "_toggle_collection_dynamic", "_enable_profiler_legacy",
            "_disable_profiler_legacy", "_enable_record_function", "_clear_callbacks",
            "_set_empty_test_observer", "_kineto_step",
        )
    ]
    names += [
        (torch._C._DispatchOperatorHandle, "redispatch_boxed"),
        (torch._C, "_dispatch_library"),
        (torch._C, "_EnablePythonDispatcher"),
    ]
    safe = getattr(torch._C, "_SafeKernelFunction", None)
    if safe is not None:
        names.append((safe, "call_boxed"))
    return [(owner, n) for owner, n in names if hasattr(owner, n)]


def scrub() -> dict[str, object]:
    """Replace the guarded entry points everywhere they are bound; return the originals.

    Modules that imported one by name (``torch.autograd.profiler._disable_profiler``) are found
    through ``sys.modules`` and rebound too.
    """
    originals: dict[str, object] = {}
    targets = _guarded_entry_points()
    by_id = {}
    for owner, name in targets:
        value = getattr(owner, name)
        originals[name] = value
        by_id[id(value)] = name
        setattr(owner, name, _stub(f"{getattr(owner, '__name__', owner)}.{name}"))
    for module in list(sys.modules.values()):
        namespace = getattr(module, "__dict__", None)
        if not isinstance(namespace, dict):
            continue
        for key, value in list(namespace.items()):
            if id(value) in by_id and value is originals[by_id[id(value)]]:
                namespace[key] = _stub(f"{module.__name__}.{key}")
    return originals
