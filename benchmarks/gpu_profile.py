"""Where a compiled candidate spends its GPU time: a diagnostic, not a verdict.

    PYTHONPATH=src python3 benchmarks/gpu_profile.py --programs FILE [--levels 1,2,5] \\
        [--mode strict] [--out DIR]
    PYTHONPATH=src python3 benchmarks/gpu_profile.py --real gpt2_mlp_up,llama_gate_silu --configs

``--real`` names real-suite programs (full size) instead of a programs file. ``--configs``
times every kernel at every config of its tuning space (config i of each space, the last
where a space is shorter), beside the config convert-time tuning (``compiler.tune``) chooses:
whether that choice is the fastest.

For each program: compile it with the built-in compiler (strict by default, cuda), run it once, then
time eager and the candidate the way the judge does (L2 flushed, CUDA events, median) and time every
Triton launch of one candidate call separately (synchronised around each launch). Also measures the
host-side cost of one launch for a tiny elementwise kernel in three spellings (plain jit, autotuned,
autotuned behind the judge's launch hook). Nothing here is verified by the judge, so its ratios are
diagnostics for the compiler's developers, never results. Writes profile.json and prints a table as
it goes.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import statistics
import sys
import tempfile
import time
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

import torch  # noqa: E402
import triton  # noqa: E402
import triton.language as tl  # noqa: E402

from drtriton.compiler import CompilerConfig, compile_program  # noqa: E402
from drtriton.synth import read_jsonl  # noqa: E402
from gpu_timing import median_ms as _median_ms  # noqa: E402


def _load(source: str, name: str):
    path = Path(tempfile.mkdtemp()) / f"{name}.py"  # real Triton needs a source file
    path.write_text(source)
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def per_kernel_ms(model, xs) -> list[tuple[str, float]]:
    """One call with every Triton launch bracketed by events (synchronised: serialised)."""
    from triton.runtime.jit import JITFunction

    original = JITFunction.run
    spans: list[tuple[str, object, object]] = []

    def run(self, *args, **kwargs):
        if kwargs.get("warmup"):
            return original(self, *args, **kwargs)
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        out = original(self, *args, **kwargs)
        e.record()
        spans.append((self.__name__, s, e))
        return out

    JITFunction.run = run
    try:
        with torch.no_grad():
            model(*xs)
        torch.cuda.synchronize()
    finally:
        JITFunction.run = original
    return [(name, s.elapsed_time(e)) for name, s, e in spans]


def profile_program(program, out_dir: Path, mode: str = "strict") -> dict:
    row = {"id": program.id, "level": program.level, "ops": " ".join(program.ops), "mode": mode}
    t0 = time.perf_counter()
    try:
        candidate = compile_program(program.source, CompilerConfig(mode=mode, device="cuda"))
        (out_dir / f"{program.id}.py").write_text(candidate)
        ref = _load(program.source, "reference")
        cand = _load(candidate, "candidate")
        torch.manual_seed(0)
        xs = [x.cuda() if isinstance(x, torch.Tensor) else x for x in ref.get_inputs()]
        init = ref.get_init_inputs()
        torch.manual_seed(1)
        model = ref.Model(*init).cuda()
        torch.manual_seed(1)
        new = cand.ModelNew(*init).cuda()
        with torch.no_grad():
            want = model(*xs)
            got = new(*xs)  # compiles + autotunes
            torch.cuda.synchronize()
        want = want if isinstance(want, tuple) else (want,)
        got = got if isinstance(got, tuple) else (got,)
        row["max_abs_err"] = max(float((a - b).abs().nan_to_num(0).max()) for a, b in
                                 zip(want, got, strict=True))
        with torch.no_grad():
            row["eager_ms"] = _median_ms(lambda: model(*xs))
            row["candidate_ms"] = _median_ms(lambda: new(*xs))
        row["ratio"] = row["eager_ms"] / row["candidate_ms"]
        row["kernels"] = per_kernel_ms(new, xs)
        row["numel_in"] = sum(x.numel() for x in xs if isinstance(x, torch.Tensor))
    except Exception as exc:  # a diagnostic keeps going
        row["error"] = f"{type(exc).__name__}: {exc}"[:800]
        row["traceback"] = traceback.format_exc()[-3000:]
    row["wall_s"] = time.perf_counter() - t0
    return row


@triton.jit
def _silu_plain(x_ptr, o_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    x = tl.load(x_ptr + offs, mask=m)
    tl.store(o_ptr + offs, x * tl.sigmoid(x), mask=m)


_silu_tuned = triton.autotune(
    configs=[triton.Config({"BLOCK": b}, num_warps=w) for b, w in ((256, 2), (1024, 4), (4096, 8))],
    key=["n"],
)(triton.jit(_silu_plain.fn))


def launch_overhead() -> dict:
    """Host microseconds per launch (no sync between launches) and judged-style event time."""
    x = torch.randn(8009, device="cuda")
    o = torch.empty_like(x)
    variants = {
        "eager_silu": lambda: torch.nn.functional.silu(x),
        "plain_jit": lambda: _silu_plain[(8,)](x, o, 8009, BLOCK=1024),
        "autotuned": lambda: _silu_tuned[lambda m: (triton.cdiv(8009, m["BLOCK"]),)](x, o, 8009),
        "empty_alloc": lambda: torch.empty((8009,), device=x.device),
    }
    out = {}
    for name, fn in variants.items():
        for _ in range(20):
            fn()
        torch.cuda.synchronize()
        t = time.perf_counter()
        for _ in range(2000):
            fn()
        torch.cuda.synchronize()
        out[name] = {"host_us": (time.perf_counter() - t) / 2000 * 1e6,
                     "event_ms": _median_ms(fn)}
    from drtriton.judge.monitor import Monitor

    Monitor(()).install()  # the judge's launch hook, inactive as while timing
    fn = variants["autotuned"]
    t = time.perf_counter()
    for _ in range(2000):
        fn()
    torch.cuda.synchronize()
    out["autotuned_hooked"] = {"host_us": (time.perf_counter() - t) / 2000 * 1e6,
                               "event_ms": _median_ms(fn)}
    return out


def config_sweep(program, mode: str = "strict") -> dict:
    """Per kernel: its time at each config of its space, and at convert-time tuning's choice."""
    from triton.runtime.autotuner import Autotuner

    from drtriton.compiler import Tuning
    from drtriton.compiler.tune import measure_choices

    config = CompilerConfig(mode=mode, device="cuda")
    autotuned = compile_program(program.source, config)
    ref = _load(program.source, "reference")
    torch.manual_seed(0)
    xs = [x.cuda() if isinstance(x, torch.Tensor) else x for x in ref.get_inputs()]
    init = ref.get_init_inputs()
    spaces = {name: len(value.configs) for name, value in vars(_load(autotuned, "c")).items()
              if isinstance(value, Autotuner)}
    chosen = measure_choices(autotuned, program.source)
    row = {"id": program.id, "mode": mode, "chosen": dict(chosen.choices), "spaces": spaces,
           "kernel_ms": {}}
    runs = [("chosen", chosen)] + [
        (str(i), Tuning("sweep", tuple((n, min(i, k - 1)) for n, k in spaces.items())))
        for i in range(max(spaces.values(), default=0))]
    for label, tuning in runs:
        module = _load(compile_program(program.source, config, tuning), f"t{label}")
        torch.manual_seed(1)
        model = module.ModelNew(*init).cuda()
        try:
            with torch.no_grad():
                model(*xs)
        except Exception as exc:  # a config past the GPU's resources: the autotuner skips it
            row.setdefault("errors", {})[label] = f"{type(exc).__name__}: {exc}"[:200]
            continue
        times: dict[str, list[float]] = {}
        for _ in range(5):
            for name, ms in per_kernel_ms(model, xs):
                times.setdefault(name, []).append(ms)
        row["kernel_ms"][label] = {n: statistics.median(v) for n, v in times.items()}
        with torch.no_grad():  # the whole forward as the judge times it
            row.setdefault("forward_ms", {})[label] = _median_ms(lambda m=model: m(*xs))
    return row


class _Named:
    """A program of the real or heavy suite at full size, in the shape profile_program reads."""

    def __init__(self, name: str) -> None:
        from drtriton.bench.suites import load_suite, program_source

        for suite in ("real", "heavy"):
            folder = ROOT / "benchmarks" / "suites" / suite
            programs = {p.name: p for p in load_suite(folder)}
            if name in programs:
                break
        else:
            raise SystemExit(f"gpu_profile.py: no program {name!r} in the real or heavy suite")
        self.id, self.level, self.ops = name, 0, [name]
        self.source = program_source(folder, programs[name], "gpu")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--programs", type=Path)
    p.add_argument("--real", default="", help="real or heavy suite programs, comma-separated")
    p.add_argument("--configs", action="store_true", help="time each kernel at each config")
    p.add_argument("--levels", default="1,2,5")
    p.add_argument("--ids", default="", help="only programs whose id starts with one of these")
    p.add_argument("--budget-s", type=float, default=300)
    p.add_argument("--mode", choices=("strict", "hybrid"), default="strict")
    p.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", "gpu_profile")))
    args = p.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    levels = {int(v) for v in args.levels.split(",")}
    t_start = time.perf_counter()
    result = {"gpu": torch.cuda.get_device_name(), "torch": torch.__version__,
              "triton": triton.__version__, "launch": launch_overhead(), "programs": []}
    print(json.dumps(result["launch"], indent=1), flush=True)
    if not args.programs and not args.real:
        raise SystemExit("gpu_profile.py: give --programs FILE or --real NAMES")
    programs = ([_Named(n) for n in args.real.split(",") if n] if args.real
                else [p for p in read_jsonl(args.programs) if p.level in levels])
    prefixes = tuple(i for i in args.ids.split(",") if i)
    programs = [p for p in programs if not prefixes or str(p.id).startswith(prefixes)]
    for program in programs:
        if time.perf_counter() - t_start > args.budget_s:
            print("budget spent; stopping", flush=True)
            break
        if args.configs:
            try:
                row = config_sweep(program, args.mode)
            except Exception as exc:  # a diagnostic keeps going
                print(f"{program.id:<24} ERROR {type(exc).__name__}: {exc}"[:300], flush=True)
                continue
            result["programs"].append(row)
            (args.out / "profile.json").write_text(json.dumps(result, indent=1))
            for name, size in row["spaces"].items():
                times = " ".join(f"{lab}={row['kernel_ms'][lab].get(name, float('nan')):.3f}"
                                 for lab in row["kernel_ms"])
                print(f"{row['id']:<24} {name:<32} chose {row['chosen'].get(name)} of {size}: "
                      f"{times}", flush=True)
            print(f"{row['id']:<24} forward " + " ".join(
                f"{lab}={ms:.3f}" for lab, ms in row["forward_ms"].items()), flush=True)
            continue
        row = profile_program(program, args.out, args.mode)
        result["programs"].append(row)
        (args.out / "profile.json").write_text(json.dumps(result, indent=1))
        if "error" in row:
            print(f"{row['id']:<24} {row['ops'][:40]:<40} ERROR {row['error'][:200]}", flush=True)
            continue
        kernels = " ".join(f"{n}={ms:.3f}" for n, ms in row["kernels"])
        print(f"{row['id']:<24} {row['ops'][:40]:<40} eager {row['eager_ms']:.3f} "
              f"cand {row['candidate_ms']:.3f} x{row['ratio']:.2f} err {row['max_abs_err']:.1e} "
              f"| {kernels} ({row['wall_s']:.0f}s)", flush=True)


if __name__ == "__main__":
    main()
