"""Judge throughput: verdicts per second and per-candidate overhead with a warm pool.

    PYTHONPATH=src python3 benchmarks/bench_judge.py [--device cpu|cuda] [--n 12] [--workers 2]

Overhead = mean wall time of one verdict (one worker, sequential, warm pool) minus the candidate's
own run time (import + build + the same trials, measured in a forked child of a warm process with
no judge around it). Writes benchmarks/results/judge_throughput_<device>.json.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))


def _args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--device", default="cpu")
    p.add_argument("--n", type=int, default=12)
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--repeats", type=int, default=3, help="timed verdicts per pair (min 1)")
    p.add_argument("--no-compile-baseline", action="store_true",
                   help="CUDA: skip the torch.compile baseline (it dominates a verdict's cost)")
    p.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results")
    return p.parse_args()


ARGS = _args()
if ARGS.device == "cpu":
    os.environ["TRITON_INTERPRET"] = "1"  # before triton is imported, like the sandbox

import torch  # noqa: E402
import triton  # noqa: E402

from drtriton.judge import JudgeConfig, JudgePool  # noqa: E402

CASES = ROOT / "tests" / "judge_cases"
PAIRS = [("ref_add_relu.py", "legit_add_relu.py"), ("ref_softmax.py", "legit_softmax.py"),
         ("ref_linear.py", "legit_linear.py")]


_OWN_RUN = """
import sys, time, torch
sys.path.insert(0, {src!r})
from drtriton.judge import JudgeConfig
from drtriton.program import load_program, make_inputs
torch.set_num_threads(1)  # as in the sandbox
ref, cand = open({ref!r}).read(), open({cand!r}).read()
config = JudgeConfig(device={device!r})
seeds = [1 + k for k in range(config.trials)]
inputs = [make_inputs(load_program(ref), seed, {device!r}) for seed in seeds]
t0 = time.perf_counter()
import importlib.util, tempfile, os
path = os.path.join(tempfile.mkdtemp(), "candidate.py")  # real Triton needs a source file
open(path, "w").write(cand)
spec = importlib.util.spec_from_file_location("candidate", path)
mod = importlib.util.module_from_spec(spec)
spec.loader.exec_module(mod)
module = vars(mod)
torch.manual_seed(0)
model = module["ModelNew"](*r.init_inputs).to({device!r})
with torch.no_grad():
    for xs in inputs:
        model(*[x.clone() if isinstance(x, torch.Tensor) else x for x in xs])
if {device!r} != "cpu":
    torch.cuda.synchronize()
print(time.perf_counter() - t0)
"""


def own_run_time(ref: str, cand: str, device: str) -> float:
    """Seconds to exec the candidate, build it and run the trials, in a fresh warm process
    (imports and the reference run happen before the clock starts)."""
    code = _OWN_RUN.format(src=str(ROOT / "src"), ref=str(CASES / ref), cand=str(CASES / cand),
                           device=device)
    # A fresh Triton cache, as the judge gives every candidate: compile time counts on both sides.
    env = dict(os.environ, TRITON_CACHE_DIR=tempfile.mkdtemp(prefix="own-run-triton-"))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env=env, timeout=300)
    if out.returncode != 0:
        raise RuntimeError(f"own-run child failed ({out.returncode}):\n{out.stderr[-3000:]}")
    return float(out.stdout.strip().splitlines()[-1])


def main() -> None:
    config = JudgeConfig(device=ARGS.device, seed=0, timeout_s=120,
                         time_compile=not ARGS.no_compile_baseline)
    sources = [((CASES / r).read_text(), (CASES / c).read_text()) for r, c in PAIRS]
    own = {}
    for r, c in PAIRS:  # progress is printed as it goes: a run cut short still says how far it got
        own[c] = statistics.median(own_run_time(r, c, config.resolved_device()) for _ in range(3))
        print(f"own run {c}: {own[c]:.3f} s", flush=True)
    rows = {}
    t0 = time.perf_counter()
    with JudgePool(config, workers=1) as pool:
        start_s = time.perf_counter() - t0
        for (_, cand), (ref_src, cand_src) in zip(PAIRS, sources, strict=True):
            pool.verify(ref_src, cand_src)  # warm the pool's caches for this pair
            walls = []
            for _ in range(max(ARGS.repeats, 1)):
                t = time.perf_counter()
                verdict = pool.verify(ref_src, cand_src)
                walls.append(time.perf_counter() - t)
                assert verdict.status == "correct", verdict.reason
            rows[cand] = {"verdict_wall_s": statistics.mean(walls), "own_run_s": own[cand],
                          "overhead_s": statistics.mean(walls) - own[cand], "n": len(walls)}
            print(f"verdicts {cand}: {statistics.mean(walls):.3f} s each", flush=True)
    batch = [sources[i % len(sources)] for i in range(ARGS.n)]
    with JudgePool(config, workers=ARGS.workers) as pool:
        slots = pool.size  # on CUDA one slot per visible GPU, whatever --workers asks
        pool.verify_many(batch[: ARGS.workers])
        t = time.perf_counter()
        verdicts = pool.verify_many(batch)
        elapsed = time.perf_counter() - t
    assert all(v.status == "correct" for v in verdicts)
    result = {
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "device": ARGS.device,
        "machine": {
            "cpu_count": os.cpu_count(),
            "platform": platform.platform(),
            "processor": platform.processor(),
            "gpu": torch.cuda.get_device_name() if ARGS.device != "cpu" else None,
        },
        "versions": {
            "python": platform.python_version(),
            "torch": torch.__version__,
            "triton": triton.__version__,
        },
        "time_compile_baseline": config.time_compile,
        "pool_start_s": start_s,
        "sequential_one_worker": rows,
        "mean_overhead_s": statistics.mean(r["overhead_s"] for r in rows.values()),
        "concurrent": {
            "workers_asked": ARGS.workers,
            "slots": slots,
            "verdicts": len(batch),
            "wall_s": elapsed,
            "verdicts_per_s": len(batch) / elapsed,
        },
    }
    ARGS.out.mkdir(parents=True, exist_ok=True)
    path = ARGS.out / f"judge_throughput_{ARGS.device}.json"
    path.write_text(json.dumps(result, indent=1))
    for cand, r in rows.items():
        print(f"{cand:<20} verdict {r['verdict_wall_s']:.3f} s  own run {r['own_run_s']:.3f} s  "
              f"overhead {r['overhead_s']:.3f} s")
    print(f"pool start {start_s:.2f} s; {slots} slots: "
          f"{result['concurrent']['verdicts_per_s']:.2f} verdicts/s; wrote {path}")


if __name__ == "__main__":
    main()
