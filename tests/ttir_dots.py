"""Compile every kernel of a candidate for an sm_90 GPU (no GPU needed) and print its dot ops.

    python tests/ttir_dots.py CANDIDATE.py   # JSON: {kernel: ["tt.dot ... lines"]}

Run without TRITON_INTERPRET (the interpreter has no compiler passes). Used by
test_compiler_ttir.py: Triton's combine pass can turn a broadcast-multiply-sum into a TF32
``tt.dot``, which only shows after compilation.
"""

import importlib.util
import json
import re
import sys

import triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource

from compiler_cases.launches import launches

TARGET = GPUTarget("cuda", 90, 32)


def launch_constexprs(args: str) -> dict:
    """Keyword constants of a fixed launch's arguments, e.g. ``a, b, 1, BM=1, num_warps=4``."""
    pairs = re.findall(r"(\w+)=(\d+)", args)
    return {k: int(v) for k, v in pairs if k not in ("num_warps", "num_stages")}


def dots(path: str) -> dict[str, list[str]]:
    source = open(path).read()
    spec = importlib.util.spec_from_file_location("candidate", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    launched = {name: args for name, _, args in launches(source)}
    out = {}
    for name, obj in vars(module).items():
        if isinstance(obj, triton.runtime.Autotuner):
            settings = [c.all_kwargs() for c in obj.configs]
            fn = obj.fn
        elif isinstance(obj, triton.runtime.JITFunction) and name in launched:  # not a helper
            settings, fn = [launch_constexprs(launched[name])], obj
        else:
            continue
        for k, setting in enumerate(settings):
            constexprs = {p.name: setting[p.name] for p in fn.params if p.is_constexpr}
            signature = {
                p.name: "constexpr"
                if p.is_constexpr
                else ("*fp32" if p.name.endswith("_ptr") else "i32")
                for p in fn.params
            }
            src = ASTSource(fn=fn, signature=signature, constexprs=constexprs)
            ttir = triton.compile(src, target=TARGET).asm["ttir"]
            out[f"{name}#{k}"] = [
                line.strip()[:200] for line in ttir.splitlines() if "tt.dot" in line
            ]
    return out


if __name__ == "__main__":
    print(json.dumps(dots(sys.argv[1])))
