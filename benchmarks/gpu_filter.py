"""Run the synthesis filters on a GPU over a pool of GPU-scale programs; keep the first valid ones.

GPU-scale programs are made on a CPU with shape checks only (running them there takes minutes and
more memory than the machine has), so the filters that need real data (constant or non-finite
outputs, unused inputs, float32 results that are not the float64 ones) first run on the GPU. At
level 20 most draws fail them (7 of the first 8 held-out programs on the H200), so the level-20
sample is the first ``--keep`` programs of a larger held-out pool, in index order, that pass.

    # one shard per GPU (each appends one line per program to its log, and skips logged ones)
    CUDA_VISIBLE_DEVICES=0 python benchmarks/gpu_filter.py check --programs POOL --log L0 \\
        --shard 0/2
    CUDA_VISIBLE_DEVICES=1 python benchmarks/gpu_filter.py check --programs POOL --log L1 \\
        --shard 1/2
    # the sample: the first KEEP valid programs per level, in index order, from every log
    python benchmarks/gpu_filter.py keep --programs POOL --logs L0 L1 --keep 8 --out SAMPLE.jsonl

``keep`` refuses to write a sample while a program before the last one kept is still unchecked.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from drtriton.synth import read_jsonl, write_jsonl


def check(programs: Path, log: Path, shard: str) -> None:
    import torch

    from drtriton.bench.run import run_filters

    part, parts = map(int, shard.split("/"))
    done = (
        {json.loads(line)["id"] for line in log.read_text().splitlines()} if log.exists() else set()
    )
    pool = [p for k, p in enumerate(read_jsonl(programs)) if k % parts == part and p.id not in done]
    device = "cuda"
    for program in pool:
        started = time.perf_counter()
        reason = run_filters(program, device)  # frees the GPU cache after itself
        entry = {"id": program.id, "level": program.level, "index": program.index,
                 "reason": reason, "seconds": round(time.perf_counter() - started, 1),
                 "device": torch.cuda.get_device_name(0)}
        with log.open("a") as f:
            f.write(json.dumps(entry) + "\n")
        print(
            f"L{program.level}-{program.index} {reason or 'valid'} ({entry['seconds']} s)",
            flush=True,
        )


def keep(programs: Path, logs: list[Path], count: int, out: Path) -> None:
    reasons: dict[str, str | None] = {}
    for log in logs:
        for line in log.read_text().splitlines() if log.exists() else []:
            entry = json.loads(line)
            reasons[entry["id"]] = entry["reason"]
    kept, unchecked = [], []
    for program in read_jsonl(programs):
        if sum(p.level == program.level for p in kept) >= count:
            continue
        if program.id not in reasons:
            unchecked.append(program)
        elif reasons[program.id] is None:
            kept.append(program)
    late = [p for p in unchecked if any(k.level == p.level and k.index > p.index for k in kept)]
    if late:
        raise SystemExit(
            f"{len(late)} programs before the last kept are unchecked: check them first"
        )
    write_jsonl(kept, out)
    print(f"kept {len(kept)} of {len(reasons)} checked programs -> {out}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    c = sub.add_parser("check")
    c.add_argument("--programs", type=Path, required=True)
    c.add_argument("--log", type=Path, required=True)
    c.add_argument("--shard", default="0/1")
    k = sub.add_parser("keep")
    k.add_argument("--programs", type=Path, required=True)
    k.add_argument("--logs", type=Path, nargs="+", required=True)
    k.add_argument("--keep", type=int, default=8)
    k.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    if args.command == "check":
        check(args.programs, args.log, args.shard)
    else:
        keep(args.programs, args.logs, args.keep, args.out)


if __name__ == "__main__":
    main()
