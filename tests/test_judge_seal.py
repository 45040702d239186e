"""The audit hook tells an honest kernel that fails to compile from a candidate reaching frames.

Triton strips its code generator's frames from a CompilationError by reading each traceback's
``tb_frame``; that read, by Triton's own code, must not be judged a tamper attempt, while the
same read by any other code still is. Runs in a fresh process (the hook cannot be removed) and
compiles for an sm_90 target without the interpreter (no GPU needed).
"""

import json
import os
import subprocess
import sys

SCRIPT = r'''
import json
import triton
import triton.language as tl
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource
from drtriton.judge import seal


@triton.jit
def broken(x_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, 3)  # not a power of two: a compile-time error
    tl.store(x_ptr + offs, tl.load(x_ptr + offs))


blocked = seal.install_audit_hook([], [])
result = {}
try:
    src = ASTSource(fn=broken, signature={"x_ptr": "*fp32", "BLOCK": "constexpr"},
                    constexprs={"BLOCK": 4})
    triton.compile(src, target=GPUTarget("cuda", 90, 32))
    result["compile"] = "compiled"
except seal.SealViolation as exc:
    result["compile"] = f"sealed: {exc}"
except Exception as exc:
    result["compile"] = type(exc).__name__
result["after_compile"] = blocked()
try:
    raise RuntimeError
except RuntimeError as exc:
    try:
        exc.__traceback__.tb_frame
        result["direct"] = "read"
    except seal.SealViolation:
        result["direct"] = "sealed"
result["after_direct"] = blocked()
print(json.dumps(result))
'''


def test_triton_compile_error_is_not_a_tamper_but_a_frame_read_is(tmp_path):
    script = tmp_path / "compile_under_seal.py"  # @triton.jit needs its source in a file
    script.write_text(SCRIPT)
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    done = subprocess.run([sys.executable, str(script)], env=env, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["compile"] == "CompilationError", result
    assert result["after_compile"] == []
    assert result["direct"] == "sealed"
    assert result["after_direct"] == ["read of tb_frame"]
