"""Write the fixed GPU-scale benchmark sample (held-out seed) that the GPU runs read.

    .venv/bin/python benchmarks/make_gpu_sample.py [--num 8] [--levels 1,2,5,20]
    # the level-20 pool: most GPU-scale level-20 draws fail the filters on the GPU
    # (benchmarks/gpu_filter.py keeps the first 8 valid ones)
    .venv/bin/python benchmarks/make_gpu_sample.py --levels 20 --num 48 \
        --out benchmarks/programs/synthetic_gpu_heldout_l20_pool.jsonl

Synthesis needs OR-Tools, so the sample is made here and committed; on the GPU machine the
benchmark re-runs the synthesis filters on CUDA before judging (drtriton.bench).
"""

from __future__ import annotations

import argparse
from pathlib import Path

import torch

from drtriton.bench import HELD_OUT_SEED, sample_indices
from drtriton.synth import SynthConfig, SynthError, synthesize_one, write_jsonl

OUT = Path(__file__).resolve().parent / "programs" / "synthetic_gpu_heldout.jsonl"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--num", type=int, default=8)
    parser.add_argument("--levels", default="1,2,5,20")
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args()
    torch.set_num_threads(1)
    programs = []
    for level in map(int, args.levels.split(",")):
        config = SynthConfig(level=level, num=1, seed=HELD_OUT_SEED, scale="gpu")
        made = 0
        for i in sample_indices(level, args.num, HELD_OUT_SEED):
            try:
                programs.append(synthesize_one(config, i).program)
                made += 1
            except SynthError as exc:  # no valid draw within the attempt budget: left out, said
                print(f"level {level} index {i}: skipped: {exc}", flush=True)
        print(f"level {level}: {made} of {args.num} programs", flush=True)
    write_jsonl(programs, args.out)
    print(f"wrote {len(programs)} programs to {args.out}")


if __name__ == "__main__":
    main()
