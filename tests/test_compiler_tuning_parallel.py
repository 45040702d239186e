"""The configs a convert tunes are compiled in several processes, each its share: run here with
Triton's real launch path up to the compile, a stand-in driver for an sm_90 GPU, and the compile
itself recorded instead of run (no GPU, no interpreter)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

SCRIPT = r'''
import json, sys
sys.path.insert(0, "tests")
import torch
from triton.backends.compiler import GPUTarget
from triton.runtime import driver
from triton.runtime.jit import JITFunction


class Hopper:  # what a launch asks of the driver before it compiles
    def get_current_device(self):
        return 0

    def get_current_stream(self, device=None):
        return 0

    def get_current_target(self):
        return GPUTarget("cuda", 90, 32)

    def get_active_torch_device(self):
        return torch.device("meta")


driver.set_active(Hopper())
compiled = []


def record(self, key, signature, device, constexprs, options, attrs, warmup):
    constants = sorted((str(k), v) for k, v in constexprs.items())
    compiled.append([self.__name__, constants, options.num_warps])
    return object()


JITFunction._do_compile = record
from compiler_cases.realworld import CASES  # noqa: E402
from drtriton.compiler import CompilerConfig, compile_program, kernels, tune  # noqa: E402
from drtriton.program import load_program  # noqa: E402

kernels.writer.SMALL_WORK = 0  # small programs, autotuned anyway
reference = CASES[sys.argv[1]]
candidate = compile_program(reference, CompilerConfig(device="cuda"))
program = load_program(reference, "reference")
out = {}
for parts in (1, 2, 3):
    out[parts] = []
    for part in range(parts):  # each worker imports the candidate afresh: nothing compiled yet
        compiled.clear()
        assert tune._compile_part(tune._import_file(candidate), program, part, parts)
        out[parts].append(list(compiled))
compiled.clear()
# its workers fail (no GPU here): what this process compiled is its own share
tune._precompile_in_processes(tune._import_file(candidate), program, reference, 2)
out["with_workers"] = list(compiled)
print(json.dumps(out))
'''


def _shares(name: str) -> dict:
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env["PYTHONPATH"] = str(ROOT / "src")
    done = subprocess.run([sys.executable, "-c", SCRIPT, name], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.splitlines()[-1])


def _key(compile_: list) -> str:
    return json.dumps(compile_)


def test_each_config_is_compiled_by_exactly_one_worker():
    # (the stand-in compile caches nothing: a config launched again is recorded again, so the
    # comparisons are of sets)
    shares = _shares("attention_scores")
    everything = {_key(c) for c in shares["1"][0]}
    assert len(everything) > len({c[0] for c in shares["1"][0]})  # several configs per kernel
    for parts in ("2", "3"):
        split = [{_key(c) for c in share} for share in shares[parts]]
        assert set().union(*split) == everything and all(split)
        assert sum(map(len, split)) == len(everything)  # none compiled by two workers
    # a worker that fails leaves its share to the full compile that follows; this process did
    # its own share meanwhile
    assert {_key(c) for c in shares["with_workers"]} == {_key(c) for c in shares["2"][0]}
