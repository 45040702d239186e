"""Generation rate of the CSP-DAG synthesizer: programs/s per worker, validity filter on.

    .venv/bin/python benchmarks/bench_synth.py [--num 40] [--levels 1,2,5,20] [--scales small,gpu]

One worker process (torch limited to one thread), so programs per CPU-second is the rate per core
(wall-clock rate is recorded too; on a shared machine it also counts other load). Small-scale
programs are run with the quality filters (finite, non-constant, every input used); GPU-scale
programs are shape-checked on the meta device on a CPU machine (the filters run where they can be
run: add --device cuda on a GPU). Writes benchmarks/results/synth_rate.{json,csv}; then
``python benchmarks/report.py`` updates the table in docs/synthesis.md.
"""

from __future__ import annotations

import argparse
import time
from collections import Counter
from pathlib import Path

import torch

from drtriton.bench import machine_record, write_results
from drtriton.ops import SCALES
from drtriton.synth import SynthConfig, iter_synthesize

RESULTS = Path(__file__).resolve().parent / "results" / "synth_rate"


def measure(level: int, scale: str, num: int, device: str, seed: int) -> dict:
    config = SynthConfig(level=level, num=num, seed=seed, scale=scale, device=device)
    rejected: Counter[str] = Counter()
    attempts = 0
    in_band = 0
    band_lo = SCALES[scale].flops_lo
    started, cpu_started = time.perf_counter(), time.process_time()
    for result in iter_synthesize(config):
        rejected.update(result.rejected)
        attempts += result.program.attempts
        in_band += result.program.flops >= band_lo
    elapsed = time.perf_counter() - started
    cpu = time.process_time() - cpu_started  # robust to other load on a shared machine
    return {
        "level": level,
        "scale": scale,
        "programs": num,
        "check": config.check_mode(),
        "seconds": round(elapsed, 2),
        "programs_per_s": round(num / elapsed, 2),
        "cpu_seconds": round(cpu, 2),
        "programs_per_cpu_s": round(num / cpu, 2),
        "draws_per_program": round(attempts / num, 2),
        "frac_in_flop_band": round(in_band / num, 2),
        "rejected": " ".join(f"{k}={v}" for k, v in sorted(rejected.items())) or "-",
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--num", type=int, default=40)
    parser.add_argument("--levels", default="1,2,5,20")
    parser.add_argument("--scales", default="small,gpu")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--seed", type=int, default=1000)
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()
    torch.set_num_threads(1)
    measure(1, "small", 2, args.device, args.seed)  # warm-up: imports and first solver call
    rows = []
    for scale in args.scales.split(","):
        for level in map(int, args.levels.split(",")):
            row = measure(level, scale, args.num, args.device, args.seed)
            print(row, flush=True)
            rows.append(row)
    meta = machine_record() | {
        "workers": 1,
        "torch_threads": 1,
        "command": "benchmarks/bench_synth.py",
    }
    write_results(args.out, rows, meta)
    print(f"wrote {args.out}.json and .csv")


if __name__ == "__main__":
    main()
