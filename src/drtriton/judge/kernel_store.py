"""Compiled kernels that outlive one candidate, written only by a step that runs no candidate.

A candidate's child compiles its Triton kernels in a private cache (a cache it could write would
let it leave answers, or a poisoned binary, for a later candidate). On a GPU that compilation was
most of a warm verdict: about 1.3 s per kernel config on an H200, and then gcc builds Triton's
driver utilities and (Triton 3.6) a C launcher per kernel signature. The store keeps binaries
that no candidate wrote:

* **request**: in a candidate's child, each compilation is described as data: the source text
  and first line of the kernel and of every ``@triton.jit`` function it calls, the globals they
  use (triton modules, literal constants), the signature, constants, attributes, options and
  target, and Triton's own hash of all that (``describe``). Kernels whose globals are anything
  else (closures, other objects) are not described and compile as before.
* **compile**: after the verdict, the judge hands each new request to a fresh child of a
  CPU-only sandbox (no GPU, no candidate code): it rebuilds the functions from their text,
  checks that Triton's hash of them equals the request's and cross-compiles for the target
  (``compile_request``). One child per request: Triton's code generator can call Python
  functions reachable from a triton module, so a hostile request may run code in its child,
  and it must not share that child with another request's binary. A C module's request is its
  source and compiler flags, built with Triton's own command (``module_request``).
* **key**: the judge stores the entry under the SHA-256 of the request as data (``request_key``),
  never under anything a child reports. A child finds an entry only by describing exactly that
  request: the same kernel text. So an entry can only be what compiling that text yields, and a
  request can only spoil entries of its own text.
* **read**: the store is mounted read-only in every sandbox; its root has no read permission,
  so a child opens entries by key and cannot list them (``install_child_hook``).
"""

from __future__ import annotations

import ast
import builtins
import hashlib
import json
import os
import queue
import re
import secrets
import shutil
import tempfile
import threading
import time
from pathlib import Path

from drtriton.program import parse_python
from drtriton.scratch import cache_path

STORE_FORMAT = 1
REQUESTS_FILE = "kernel_requests.jsonl"  # in a candidate's job directory, written by its child
MAX_REQUESTS_PER_CHILD = 32
MAX_REQUEST_BYTES = 256 * 1024
MAX_ENTRY_BYTES = 64 << 20
ROOT_MODE = 0o311  # owner may create entries by name; nobody may list them
ALLOWED_MODULES = ("math", "copy")  # besides triton and its submodules, as Triton allows
_SAFE_NAME = re.compile(r"^[A-Za-z0-9_.-]{1,200}$")
_ENTRY = "entry.json"


class Undescribable(Exception):
    """A kernel whose compilation cannot be written down as data (it compiles privately)."""


def request_key(request: dict) -> str:
    """The store key: SHA-256 of the request as canonical JSON (computed by whoever reads)."""
    return hashlib.sha256(json.dumps(request, sort_keys=True).encode()).hexdigest()


def triton_hash(src, target, options: dict) -> str:
    """Triton's cache hash of compiling ``src`` (an ASTSource) for ``target`` with ``options``,
    computed as ``triton.compile`` computes it."""
    from triton.compiler.compiler import (
        get_cache_invalidating_env_vars,
        get_cache_key,
        make_backend,
    )

    backend = make_backend(target)
    parsed = backend.parse_options(dict(options or {}, **src.parse_options()))
    key = get_cache_key(src, backend, parsed, env_vars=get_cache_invalidating_env_vars())
    return hashlib.sha256(key.encode("utf-8")).hexdigest()


# ---- in a candidate's child ----------------------------------------------------------------
def describe(src, target, options: dict) -> dict:
    """The request for compiling ``src`` (an ASTSource); raises ``Undescribable``."""
    import triton

    functions: list[dict | None] = []
    index: dict[int, int] = {}
    _describe_function(src.fn, functions, index)
    request = {
        "format": STORE_FORMAT,
        "kind": "kernel",
        "triton": triton.__version__,
        "functions": functions,
        "signature": _literal(src.signature),
        "constants": _literal(src.constants),
        "attrs": _literal(src.attrs),
        "target": [target.backend, target.arch, target.warp_size],
        "options": _literal(sorted((options or {}).items())),
    }
    request["hash"] = triton_hash(src, target, options)
    return request


def module_request(src: str, name: str, library_dirs=None, include_dirs=None, libraries=None,
                   ccflags=None) -> dict:
    """The request for building a C extension module, as ``compile_module_from_src`` does
    (Triton's driver utilities and, in Triton 3.6, one launcher per kernel signature)."""
    import sysconfig

    import triton
    from triton.runtime.build import platform_key

    return {
        "format": STORE_FORMAT,
        "kind": "module",
        "triton": triton.__version__,
        "name": name,
        "src": src,
        "library_dirs": list(library_dirs or []),
        "include_dirs": [d for d in include_dirs or [] if d is not None],
        "libraries": list(libraries or []),
        "ccflags": list(ccflags or []),
        "platform": platform_key(),
        "suffix": sysconfig.get_config_var("EXT_SUFFIX"),
    }


def _describe_function(jit, functions: list, index: dict[int, int]) -> int:
    from triton.runtime.jit import JITFunction

    if not isinstance(jit, JITFunction) or jit.fn.__closure__:
        raise Undescribable(f"{jit!r} is not a plain @triton.jit function")
    if id(jit) in index:
        return index[id(jit)]
    index[id(jit)] = position = len(functions)
    functions.append(None)  # its place, before its callees (recursion ends at the index)
    names = {n.id for n in ast.walk(parse_python(jit.src)) if isinstance(n, ast.Name)}
    scope = jit.fn.__globals__
    used = {}
    for name in sorted(names & scope.keys()):
        used[name] = _describe_global(scope[name], functions, index)
    functions[position] = {
        "name": jit.fn.__name__,
        "src": jit.src,
        "line": jit.starting_line_number,
        "noinline": bool(jit.noinline),
        "globals": used,
    }
    return position


def _describe_global(value, functions: list, index: dict[int, int]) -> list:
    import types

    import triton.language as tl
    from triton.runtime.jit import JITFunction

    if isinstance(value, types.ModuleType):
        if not _allowed_module(value.__name__):
            raise Undescribable(f"module {value.__name__}")
        return ["module", value.__name__]
    if isinstance(value, JITFunction):
        return ["jit", _describe_function(value, functions, index)]
    if isinstance(value, tl.constexpr):
        return ["constexpr", _literal(value.value)]
    if value is None or type(value) in (bool, int, float, str):
        return ["value", _literal(value)]
    raise Undescribable(f"global of type {type(value).__name__}")


def _allowed_module(name: str) -> bool:
    return name == "triton" or name.startswith("triton.") or name in ALLOWED_MODULES


def _read_literal(text: str):
    return ast.literal_eval(parse_python(text, mode="eval"))


def _literal(value) -> str:
    """``repr`` of a value made only of Python literals (checked by reading it back)."""
    text = repr(value)
    try:
        same = _read_literal(text) == value
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        same = False
    if not same:
        raise Undescribable(f"not a literal: {text[:80]}")
    return text


def install_child_hook(store_root: str, requests_path: str) -> dict[str, int]:
    """Route the child's Triton compilations (kernels, and the C modules of its driver and
    launchers) through the store: one found there is loaded instead of built; one built here is
    noted in ``requests_path`` for the judge. Anything unexpected falls back to Triton's own
    path. Returns the counts it keeps (``loaded``, ``compiled``)."""
    counts = {"loaded": 0, "compiled": 0}
    _hook_kernels(store_root, requests_path, counts)
    _hook_modules(store_root, requests_path, counts)
    return counts


def _hook_kernels(store_root: str, requests_path: str, counts: dict[str, int]) -> None:
    import triton.compiler as package
    from triton.compiler import ASTSource

    original = package.compile

    def compile(src, target=None, options=None, _env_vars=None):
        request = None
        if isinstance(src, ASTSource) and target is not None:
            try:
                request = describe(src, target, options or {})
            except Exception:
                request = None
        if request is not None and store_root:
            kernel = load_entry(store_root, request_key(request), src, request["hash"])
            if kernel is not None:
                counts["loaded"] += 1
                return kernel
        kernel = original(src, target, options, _env_vars)
        _built(requests_path, request, counts)
        return kernel

    package.compile = compile


def _hook_modules(store_root: str, requests_path: str, counts: dict[str, int]) -> None:
    import importlib

    from triton.runtime import build

    original = build.compile_module_from_src

    def compile_module_from_src(src, name, library_dirs=None, include_dirs=None, libraries=None,
                                ccflags=None):
        request = None
        try:
            request = module_request(src, name, library_dirs, include_dirs, libraries, ccflags)
            path = os.path.join(store_root, request_key(request), name + request["suffix"])
            if os.path.isfile(path):
                module = build._load_module_from_path(name, path)
                counts["loaded"] += 1
                return module
        except Exception:
            pass
        module = original(src, name, library_dirs, include_dirs, libraries, ccflags)
        _built(requests_path, request, counts)
        return module

    build.compile_module_from_src = compile_module_from_src
    for user in ("triton.backends.nvidia.driver", "triton.backends.amd.driver"):
        try:
            driver = importlib.import_module(user)
        except Exception:
            continue
        if getattr(driver, "compile_module_from_src", None) is original:
            driver.compile_module_from_src = compile_module_from_src


def _built(requests_path: str, request: dict | None, counts: dict[str, int]) -> None:
    counts["compiled"] += 1
    if request is not None and counts["compiled"] <= MAX_REQUESTS_PER_CHILD:
        _note(requests_path, request)


def load_entry(store_root: str, key: str, src, hash_: str):
    """The CompiledKernel stored under ``key``, or None."""
    from triton.compiler import CompiledKernel

    entry = os.path.join(store_root, key)
    try:
        with open(os.path.join(entry, _ENTRY)) as f:
            names = json.load(f)["files"]
        group = {name: os.path.join(entry, name) for name in names if _SAFE_NAME.match(name)}
        return CompiledKernel(src, group, hash_)
    except (OSError, ValueError, KeyError, TypeError, StopIteration):
        return None


def _note(path: str, request: dict) -> None:
    line = json.dumps(request, sort_keys=True)
    if len(line) <= MAX_REQUEST_BYTES:
        with open(path, "a") as f:
            f.write(line + "\n")


# ---- in a compile child (no candidate code) ---------------------------------------------
def compile_request(request: dict, entry_dir: str) -> dict:
    """Build what ``request`` describes into ``entry_dir`` (``_compile_kernel``,
    ``_compile_module``). Returns ``{"ok": bool, "reason": str}``."""
    import triton

    if request.get("format") != STORE_FORMAT or request.get("triton") != triton.__version__:
        return {"ok": False, "reason": "another store format or Triton version"}
    if request.get("kind") == "module":
        return _compile_module(request, entry_dir)
    return _compile_kernel(request, entry_dir)


def _compile_module(request: dict, entry_dir: str) -> dict:
    """Build the C module with Triton's own compiler command, as the child would have."""
    from triton.runtime.build import _build, platform_key

    name = request["name"]
    if not _SAFE_NAME.match(name + request["suffix"]) or request["platform"] != platform_key():
        return {"ok": False, "reason": "a module for another platform, or a bad name"}
    build_dir = Path(entry_dir).parent / "build"
    build_dir.mkdir(parents=True)
    source = build_dir / f"{name}.c"
    source.write_text(request["src"])
    built = _build(name, str(source), str(build_dir), request["library_dirs"],
                   request["include_dirs"], request["libraries"], request["ccflags"])
    os.makedirs(entry_dir)
    shutil.copyfile(built, os.path.join(entry_dir, name + request["suffix"]))
    with open(os.path.join(entry_dir, _ENTRY), "w") as f:
        json.dump({"files": [name + request["suffix"]]}, f)
    return {"ok": True, "reason": ""}


def _compile_kernel(request: dict, entry_dir: str) -> dict:
    """Rebuild the request's functions, check Triton's hash, cross-compile, and copy the
    binary and its metadata into ``entry_dir``."""
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    sources = Path(entry_dir).parent / "sources"
    sources.mkdir(parents=True, exist_ok=True)
    built: dict[int, object] = {}
    fn = _rebuild(0, request["functions"], built, sources)
    signature, constants, attrs = (
        _read_literal(request[k]) for k in ("signature", "constants", "attrs")
    )
    src = ASTSource(fn, signature, constants, attrs)
    target = GPUTarget(*request["target"])
    options = dict(_read_literal(request["options"]))
    if triton_hash(src, target, options) != request["hash"]:
        return {"ok": False, "reason": "the rebuilt kernel hashes differently"}
    kernel = triton.compile(src, target=target, options=options)
    os.makedirs(entry_dir)
    names = []
    for name, path in sorted(kernel.metadata_group.items()):
        if _SAFE_NAME.match(name):
            shutil.copyfile(path, os.path.join(entry_dir, name))
            names.append(name)
    with open(os.path.join(entry_dir, _ENTRY), "w") as f:
        json.dump({"files": names, "hash": kernel.hash}, f)
    return {"ok": True, "reason": ""}


def _rebuild(position: int, functions: list, built: dict, sources: Path):
    """The JITFunction of ``functions[position]``, at its original first line, with its
    globals rebuilt from their descriptions."""
    import importlib

    import triton
    import triton.language as tl

    if position in built:
        return built[position]
    spec = functions[position]
    scope: dict = {"__name__": f"drtriton_store_kernel_{position}", "__builtins__": builtins}
    decorator = triton.jit(noinline=True) if spec["noinline"] else triton.jit
    scope["_drtriton_store_jit"] = decorator
    for name, (kind, value) in spec["globals"].items():
        if kind == "module" and _allowed_module(value):
            scope[name] = importlib.import_module(value)
        elif kind == "jit":
            scope[name] = _rebuild(int(value), functions, built, sources)
        elif kind == "constexpr":
            scope[name] = tl.constexpr(_read_literal(value))
        elif kind == "value":
            scope[name] = _read_literal(value)
        else:
            raise ValueError(f"global {name}: {kind}")
    line = int(spec["line"])
    text = "\n" * (line - 1) + "@_drtriton_store_jit\n" + spec["src"]
    path = sources / f"kernel_{position}.py"
    path.write_text(text)
    exec(compile(text, str(path), "exec"), scope)
    built[position] = scope[spec["name"]]
    return built[position]


# ---- in the judge --------------------------------------------------------------------------
def default_kernel_store() -> str:
    """``$XDG_CACHE_HOME/drtriton/kernels`` (else ``~/.cache/drtriton/kernels``)."""
    return str(cache_path("kernels"))


class KernelStore:
    """The store's directory, seen from the judge: which keys it holds, and admitting entries
    that a compile child wrote."""

    def __init__(self, root: str) -> None:
        self.root = os.path.realpath(root)
        os.makedirs(self.root, exist_ok=True)
        os.chmod(self.root, ROOT_MODE)
        self._lock = threading.Lock()

    def has(self, key: str) -> bool:
        return os.path.isfile(os.path.join(self.root, key, _ENTRY))

    def new_requests(self, requests_path: Path) -> list[tuple[str, dict]]:
        """(key, request) of each well-formed request in a child's file not yet stored."""
        found: dict[str, dict] = {}
        try:
            with open(requests_path, "rb") as f:
                lines = f.read(MAX_REQUESTS_PER_CHILD * MAX_REQUEST_BYTES).splitlines()
        except OSError:
            return []
        for raw in lines[:MAX_REQUESTS_PER_CHILD]:
            try:
                request = json.loads(raw)
            except ValueError:
                continue
            if _well_formed(request):
                key = request_key(request)
                if not self.has(key):
                    found[key] = request
        return list(found.items())

    def admit(self, key: str, entry_dir: Path) -> bool:
        """Copy a compile child's entry into the store under ``key`` (atomically); False when
        it is not a plain, bounded set of files."""
        files = _entry_files(entry_dir)
        if files is None:
            return False
        staging = Path(self.root) / f".staging-{secrets.token_hex(8)}"
        staging.mkdir()
        try:
            for name in files:
                shutil.copyfile(entry_dir / name, staging / name)
            with self._lock:
                if self.has(key):
                    return True
                os.rename(staging, os.path.join(self.root, key))
            return True
        finally:
            shutil.rmtree(staging, ignore_errors=True)


def _well_formed(request) -> bool:
    if not isinstance(request, dict):
        return False
    if request.get("kind") == "module":
        texts = all(isinstance(request.get(k), str) for k in ("name", "src", "platform", "suffix"))
        lists = ("library_dirs", "include_dirs", "libraries", "ccflags")
        return texts and all(
            isinstance(request.get(k), list) and all(isinstance(v, str) for v in request[k])
            for k in lists
        )
    if not isinstance(request.get("functions"), list):
        return False
    if not request["functions"] or not all(isinstance(f, dict) for f in request["functions"]):
        return False
    text_fields = ("signature", "constants", "attrs", "options", "hash")
    return all(isinstance(request.get(k), str) for k in text_fields)


def _entry_files(entry_dir: Path) -> list[str] | None:
    """The entry's file names when every one is a regular file with a safe name, the metadata
    lists exactly them, and they are within the size bound; else None."""
    try:
        listed = json.loads((entry_dir / _ENTRY).read_text())["files"]
        present = sorted(os.listdir(entry_dir))
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if sorted([*listed, _ENTRY]) != present:
        return None
    total = 0
    for name in present:
        path = entry_dir / name
        if not _SAFE_NAME.match(name) or path.is_symlink() or not path.is_file():
            return None
        total += path.stat().st_size
    return present if total <= MAX_ENTRY_BYTES else None


class KernelCompiler:
    """Compiles requested kernels into a store on a background thread (a verdict never waits
    for it), each request in a fresh child of its own CPU-only sandbox, which sees no GPU and
    runs no candidate code. ``box`` is that sandbox (``Sandbox(..., interpret=False)``)."""

    def __init__(self, store: KernelStore, box, timeout_s: float = 180.0) -> None:
        self.store = store
        self.box = box
        self.timeout_s = timeout_s
        self.counts = {"admitted": 0, "refused": 0, "failed": 0}
        self.failures: list[str] = []  # why compilations failed (the first few)
        self._queue: queue.Queue = queue.Queue()
        self._pending: set[str] = set()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None

    def submit(self, requests_path: Path) -> int:
        """Queue the new requests of a child's file; returns how many were queued."""
        queued = 0
        for key, request in self.store.new_requests(requests_path):
            with self._lock:
                if key in self._pending:
                    continue
                self._pending.add(key)
                if self._thread is None:
                    self._thread = threading.Thread(target=self._work, daemon=True)
                    self._thread.start()
            self._queue.put((key, request))
            queued += 1
        return queued

    def wait(self, timeout_s: float = 600.0) -> bool:
        """Block until the queue is empty (benchmarks, tests); False at the timeout."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            with self._lock:
                if not self._pending:
                    return True
            time.sleep(0.05)
        return False

    def close(self) -> None:
        if self._thread is not None:
            self._queue.put(None)
            self._thread.join(timeout=self.timeout_s + 30)
        self.box.close()

    def _work(self) -> None:
        while (item := self._queue.get()) is not None:
            key, request = item
            try:
                outcome, why = self._compile(key, request)
            except Exception as exc:
                outcome, why = "failed", f"{type(exc).__name__}: {exc}"
            with self._lock:
                self.counts[outcome] += 1
                if why and len(self.failures) < 8:
                    self.failures.append(why[:300])
                self._pending.discard(key)

    def _compile(self, key: str, request: dict) -> tuple[str, str]:
        os.makedirs(self.box.scratch, exist_ok=True)
        work = Path(tempfile.mkdtemp(prefix="kernel-", dir=self.box.scratch))
        try:
            job_dir = work / "job"
            job_dir.mkdir()
            spec = {"kind": "kernel_compile", "device": "cpu", "cpu_threads": 1}
            (job_dir / "job.json").write_text(json.dumps(spec))
            (job_dir / "request.json").write_text(json.dumps(request))
            result = self.box.run(str(job_dir), self.timeout_s, str(work / "triton-cache"))
            from drtriton.judge.pair import read_report  # pair imports this module

            report = read_report(job_dir) or {}
            if result.timed_out or report.get("status") != "ok":
                why = report.get("reason") or result.output[-300:] or "no report"
                return "failed", f"compile child: {why}"
            outcome = report.get("result") or {}
            if outcome.get("ok") is not True:
                return "failed", str(outcome.get("reason", "no result"))
            if not self.store.admit(key, job_dir / "entry"):
                return "refused", "the entry is not a plain set of files"
            return "admitted", ""
        finally:
            shutil.rmtree(work, ignore_errors=True)
