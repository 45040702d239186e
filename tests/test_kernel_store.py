"""The kernel store (judge/kernel_store.py) on the CPU: Triton cross-compiles for an sm_90
target here, so a request can be described, compiled in the sandboxed compile child, stored and
loaded back without a GPU. Only running the loaded binary needs one (the gpu marker)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from drtriton.judge import isolation
from drtriton.judge.kernel_store import (
    ROOT_MODE,
    KernelCompiler,
    KernelStore,
    request_key,
)
from drtriton.judge.sandbox import Sandbox

SRC = Path(__file__).resolve().parents[1] / "src"

KERNELS = '''
import triton
import triton.language as tl

SCALE = tl.constexpr({scale})


@triton.jit
def helper(a):
    return a * SCALE


@triton.jit
def add_kernel(x, y, out, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    v = tl.load(x + offs, mask=m) + tl.load(y + offs, mask=m)
    tl.store(out + offs, helper(v), mask=m)
'''

# Runs in a plain process (Triton's interpreter off): describe the add kernel's compilation, or
# compile it through the child hook, printing what happened as JSON.
DRIVER = '''
import json, sys
sys.path.insert(0, sys.argv[1])
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource
import triton.compiler
import kernels
from drtriton.judge import kernel_store

src = ASTSource(kernels.add_kernel,
                {"x": "*fp32", "y": "*fp32", "out": "*fp32", "n": "i32", "BLOCK": "constexpr"},
                {(4,): 1024}, {(0,): [["tt.divisibility", 16]]})
target, options = GPUTarget("cuda", 90, 32), {"num_warps": 4}
if sys.argv[2] == "describe":
    print(json.dumps(kernel_store.describe(src, target, options)))
else:
    counts = kernel_store.install_child_hook(sys.argv[3], sys.argv[4])
    kernel = triton.compiler.compile(src, target=target, options=options)
    paths = sorted(kernel.metadata_group.values())
    print(json.dumps({"counts": counts, "paths": paths, "cubin": len(kernel.asm["cubin"])}))
'''


def _plain_python(tmp: Path, *args: str) -> dict:
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env.update(PYTHONPATH=str(SRC), TRITON_CACHE_DIR=str(tmp / "private-cache"))
    done = subprocess.run([sys.executable, str(tmp / "driver.py"), *args], capture_output=True,
                          text=True, env=env, timeout=300, cwd=tmp)
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def _program(tmp: Path, scale: float) -> Path:
    folder = tmp / f"scale{scale}"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "kernels.py").write_text(KERNELS.format(scale=scale))
    (tmp / "driver.py").write_text(DRIVER)
    return folder


@pytest.fixture(scope="module")
def bwrap() -> str:
    binary = isolation.bwrap_path()
    if binary is None or isolation.probe(binary):
        pytest.skip("bubblewrap cannot run here")
    return binary


@pytest.fixture(scope="module")
def compiled(tmp_path_factory, bwrap):
    """A store holding the add kernel (scale 2.0), compiled by a sandboxed compile child."""
    tmp = tmp_path_factory.mktemp("store")
    request = _plain_python(tmp, str(_program(tmp, 2.0)), "describe")
    requests = tmp / "requests.jsonl"
    requests.write_text(json.dumps(request) + "\n")
    store = KernelStore(str(tmp / "kernels"))
    compiler = KernelCompiler(store, Sandbox("cpu", str(tmp / "box"), bwrap=bwrap,
                                             interpret=False))
    try:
        assert compiler.submit(requests) == 1
        assert compiler.wait(300)
    finally:
        compiler.close()
    assert not compiler.failures, compiler.failures
    return tmp, store, request, compiler.counts


def test_compile_child_stores_the_requested_kernel(compiled) -> None:
    _, store, request, counts = compiled
    assert counts == {"admitted": 1, "refused": 0, "failed": 0}
    assert store.has(request_key(request))
    assert os.stat(store.root).st_mode & 0o777 == ROOT_MODE


def test_child_loads_a_stored_kernel_instead_of_compiling(compiled) -> None:
    tmp, store, _, _ = compiled
    noted = tmp / "noted.jsonl"
    result = _plain_python(tmp, str(tmp / "scale2.0"), "hook", store.root, str(noted))
    assert result["counts"] == {"loaded": 1, "compiled": 0}
    assert all(p.startswith(store.root + os.sep) for p in result["paths"])
    assert result["cubin"] > 0 and not noted.exists()


def test_another_kernel_text_misses_and_is_noted(compiled) -> None:
    tmp, store, request, _ = compiled
    folder = _program(tmp, 3.0)  # the same kernel with another constant: another request
    noted = tmp / "noted3.jsonl"
    result = _plain_python(tmp, str(folder), "hook", store.root, str(noted))
    assert result["counts"] == {"loaded": 0, "compiled": 1}
    other = json.loads(noted.read_text())
    assert request_key(other) != request_key(request)
    assert [k for k, _ in store.new_requests(noted)] == [request_key(other)]


def test_a_forged_request_is_not_stored(compiled, bwrap) -> None:
    """A request whose text does not hash to its claimed Triton hash (a child that lies about
    which kernel it compiled) is refused by the compile child."""
    tmp, _, request, _ = compiled
    forged = dict(request, functions=[dict(request["functions"][0]), request["functions"][1]])
    forged["functions"][0]["src"] = forged["functions"][0]["src"].replace("+ tl.load", "- tl.load")
    path = tmp / "forged.jsonl"
    path.write_text(json.dumps(forged) + "\n")
    store = KernelStore(str(tmp / "kernels-forged"))
    compiler = KernelCompiler(store, Sandbox("cpu", str(tmp / "box2"), bwrap=bwrap,
                                             interpret=False))
    try:
        compiler.submit(path)
        assert compiler.wait(300)
    finally:
        compiler.close()
    assert compiler.counts["failed"] == 1 and not store.has(request_key(forged))


def test_admit_refuses_links_and_unlisted_files(tmp_path: Path) -> None:
    store = KernelStore(str(tmp_path / "kernels"))
    entry = tmp_path / "entry"
    entry.mkdir()
    (entry / "k.cubin").write_bytes(b"\0")
    (entry / "entry.json").write_text(json.dumps({"files": ["k.cubin"]}))
    (entry / "extra.ptx").write_text("x")
    assert not store.admit("a" * 64, entry)
    (entry / "extra.ptx").unlink()
    (entry / "k.cubin").unlink()
    (entry / "k.cubin").symlink_to("/etc/passwd")
    assert not store.admit("a" * 64, entry)
    (entry / "k.cubin").unlink()
    (entry / "k.cubin").write_bytes(b"\0")
    assert store.admit("a" * 64, entry) and store.has("a" * 64)


def test_new_requests_skip_malformed_lines(tmp_path: Path) -> None:
    store = KernelStore(str(tmp_path / "kernels"))
    path = tmp_path / "r.jsonl"
    good = {"functions": [{"src": "def k(): pass"}], "signature": "{}", "constants": "{}",
            "attrs": "{}", "options": "[]", "hash": "h"}
    path.write_text("not json\n" + json.dumps({"functions": 3}) + "\n" + json.dumps(good) + "\n")
    assert [k for k, _ in store.new_requests(path)] == [request_key(good)]


def test_sandboxed_child_cannot_list_the_store(tmp_path: Path, bwrap: str) -> None:
    store = KernelStore(str(tmp_path / "kernels"))
    (Path(store.root) / ("b" * 64)).mkdir()
    probe = textwrap.dedent(f"""
        import os
        try:
            os.listdir({store.root!r}); print("listed")
        except PermissionError:
            print("denied")
        print(os.path.isdir(os.path.join({store.root!r}, {"b" * 64!r})))
        try:
            os.mkdir(os.path.join({store.root!r}, "x")); print("wrote")
        except OSError:
            print("read-only")
    """)
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    argv = isolation.command(bwrap, str(scratch), [sys.executable, "-c", probe], None, -1,
                             [sys.prefix, sys.base_prefix, store.root])
    argv.remove("--info-fd")
    argv.remove("-1")
    done = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    assert done.stdout.split() == ["denied", "True", "read-only"], done.stderr


C_MODULE = r'''
#include <Python.h>
static PyObject *answer(PyObject *self, PyObject *args) { return PyLong_FromLong(42); }
static PyMethodDef methods[] = {{"answer", answer, METH_NOARGS, ""}, {NULL, NULL, 0, NULL}};
static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "drtriton_probe", NULL, -1, methods};
PyMODINIT_FUNC PyInit_drtriton_probe(void) { return PyModule_Create(&module); }
'''

MODULE_DRIVER = '''
import json, sys
from triton.runtime import build
from drtriton.judge import kernel_store

src = open(sys.argv[1]).read()
if sys.argv[2] == "describe":
    print(json.dumps(kernel_store.module_request(src, "drtriton_probe")))
else:
    counts = kernel_store.install_child_hook(sys.argv[3], sys.argv[4])
    module = build.compile_module_from_src(src, "drtriton_probe")
    print(json.dumps({"counts": counts, "answer": module.answer(), "path": module.__file__}))
'''


def test_c_modules_are_built_once_and_loaded_by_later_children(tmp_path: Path, bwrap) -> None:
    """Triton's driver utilities and launchers are C modules built with gcc per candidate
    cache; the store builds each source once, in the compile child."""
    (tmp_path / "probe.c").write_text(C_MODULE)
    (tmp_path / "driver.py").write_text(MODULE_DRIVER)
    request = _plain_python(tmp_path, str(tmp_path / "probe.c"), "describe")
    requests = tmp_path / "requests.jsonl"
    requests.write_text(json.dumps(request) + "\n")
    store = KernelStore(str(tmp_path / "kernels"))
    compiler = KernelCompiler(store, Sandbox("cpu", str(tmp_path / "box"), bwrap=bwrap,
                                             interpret=False))
    try:
        assert compiler.submit(requests) == 1 and compiler.wait(300)
    finally:
        compiler.close()
    assert compiler.counts["admitted"] == 1, compiler.failures
    noted = tmp_path / "noted.jsonl"
    result = _plain_python(tmp_path, str(tmp_path / "probe.c"), "hook", store.root, str(noted))
    assert result["counts"] == {"loaded": 1, "compiled": 0} and result["answer"] == 42
    assert result["path"].startswith(store.root + os.sep) and not noted.exists()
