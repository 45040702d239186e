"""What ``--all-correct speed`` does to all-correct groups: a controlled A/B on one GPU.

    PYTHONPATH=src python3 benchmarks/gpu_all_correct.py \
        --programs benchmarks/programs/rl_smoke_gpu.jsonl --out "${OUT:-gpu_all_correct}"

A random policy never writes a correct answer, so all-correct groups with different speeds are
built here from two correct answers per program: the built-in compiler's CUDA emission
(autotuned blocks) and its CPU emission (fixed small blocks), both judged once on the GPU in
strict mode (real eager-relative speeds). Programs where either is incorrect, or the two speeds
are within ``--min-ratio``, are left out. Two copies of the same random ``small`` policy are then
trained on this fixed batch with the real update of ``drtriton.train.rl`` (``RLRun.update``),
one with ``all_correct="drop"`` and one with ``"speed"``. After each update the script records
the loss, gradient norm, KL and the mean score gap s(faster) - s(slower) (length-normalised
log-likelihoods). ``drop`` must leave the policy untouched (no group has signal); ``speed``
should move likelihood towards the faster answer. OUT/summary.json holds verdicts, per-step
rows and the environment; a short table prints last. ``--device cpu`` is a dry run (no timing:
every speed ties, so neither arm moves).
"""

from __future__ import annotations

import argparse
import copy
import dataclasses
import json
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

import torch  # noqa: E402

from drtriton.judge import JudgeConfig, JudgePool  # noqa: E402
from drtriton.policy import CompilerPolicy  # noqa: E402
from drtriton.train.model import init_model  # noqa: E402
from drtriton.train.rl import RLConfig, RLRun, Sample  # noqa: E402


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--programs", required=True, help="programs JSONL (source, level, id)")
    p.add_argument("--out", default=os.environ.get("OUT", "gpu_all_correct"))
    p.add_argument("--num", type=int, default=6, help="programs to try")
    p.add_argument("--steps", type=int, default=6, help="updates per arm on the fixed batch")
    p.add_argument("--lr", type=float, default=1e-5)
    p.add_argument("--lam", type=float, default=1.0)
    p.add_argument(
        "--min-ratio", type=float, default=1.05, help="speeds must differ by this factor"
    )
    p.add_argument("--device", default="cuda")
    return p.parse_args()


def answers(program: dict) -> list[tuple[str, str]]:
    """(variant, answer text): the compiler's CUDA and CPU emissions of one program."""
    return [(d, CompilerPolicy(device=d).answer(program["source"])) for d in ("cuda", "cpu")]


def build_samples(run: RLRun, programs: list[dict]) -> list[Sample]:
    samples = []
    for g, program in enumerate(programs):
        for variant, text in answers(program):
            ids = run.tokenizer(text, add_special_tokens=False)["input_ids"]
            ids = ids + [run.tokenizer.eos_token_id]
            samples.append(Sample(g, program, ids, text, f"teacher-{variant}"))
    return samples


def gap(samples: list[Sample], values: list[float]) -> float:
    """Mean over groups of s(faster answer) - s(slower answer)."""
    by_group: dict[int, list[tuple[float, float]]] = {}
    for s, v in zip(samples, values, strict=True):
        by_group.setdefault(s.group, []).append((s.speedup or 0.0, v))
    gaps = [max(g)[1] - min(g)[1] for g in by_group.values()]
    return sum(gaps) / len(gaps)


def main() -> int:
    args = parse_args()
    if args.device.startswith("cuda") and not torch.cuda.is_available():
        print("error: no CUDA GPU visible", file=sys.stderr)
        return 2
    started = time.perf_counter()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    lines = [line for line in Path(args.programs).read_text().splitlines() if line]
    programs = [json.loads(line) for line in lines][: args.num]
    model_dir = str(init_model(out / "model", "small"))
    config = RLConfig(model=model_dir, programs=args.programs, out=str(out / "drop"), n=2,
                      lr=args.lr, lam=args.lam, device=args.device, levels=(1, 2, 5, 20),
                      programs_per_step=1, all_correct="drop", mini_batches=1)
    arms = {"drop": RLRun(config)}
    judge_config = JudgeConfig(device=args.device, time_compile=False, timeout_s=120.0)
    samples = build_samples(arms["drop"], programs)
    with JudgePool(judge_config, workers=1) as pool:
        judged = arms["drop"].judge(pool, samples)
    verdicts = [{"program": s.program["id"], "variant": s.origin, "status": s.status,
                 "speedup": s.speedup, "reason": s.reason[:120]} for s in samples]
    keep = []
    for g in range(len(programs)):
        pair = [s for s in samples if s.group == g]
        if not all(s.correct for s in pair):
            continue
        if not args.device.startswith("cuda"):  # dry run: no timing, every speed ties
            keep.append(pair)
        elif all(s.speedup for s in pair):
            fast, slow = max(s.speedup for s in pair), min(s.speedup for s in pair)
            if fast >= args.min_ratio * slow:
                keep.append(pair)
    batch = []
    for new_group, pair in enumerate(keep):
        batch += [copy.copy(s) for s in pair]
        for s in batch[-len(pair):]:
            s.group = new_group
    rows = []
    if batch:
        arms["speed"] = RLRun(
            dataclasses.replace(config, out=str(out / "speed"), all_correct="speed")
        )
        for name, run in arms.items():
            before = run.answer_scores(batch)
            rows.append({"arm": name, "update": 0, "gap": gap(batch, before)})
            for k in range(1, args.steps + 1):
                stats = run.update(batch)
                rows.append(
                    {"arm": name, "update": k, "gap": gap(batch, run.answer_scores(batch))} | stats
                )
            print(
                f"{name}: gap {rows[-args.steps - 1]['gap']:+.5f} -> {rows[-1]['gap']:+.5f}",
                flush=True,
            )
    summary = {
        "environment": {"gpu": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None,
                        "torch": torch.__version__, "date": time.strftime("%Y-%m-%d")},
        "args": vars(args), "judge_calls": judged, "verdicts": verdicts,
        "groups_all_correct_with_speed_gap": len(keep), "rows": rows,
        "wall_s": time.perf_counter() - started,
    }
    (out / "summary.json").write_text(json.dumps(summary, indent=1))
    for v in verdicts:
        print(f"{v['program']} {v['variant']:<13} {v['status']:<10} {v['speedup']}")
    print(f"{'arm':<6} {'update':>6} {'gap':>10} {'loss':>10} {'grad_norm':>10} {'kl':>10}")
    for r in rows:
        print(f"{r['arm']:<6} {r['update']:>6} {r['gap']:>+10.5f} {r.get('loss', 0):>10.4g} "
              f"{r.get('grad_norm', 0):>10.4g} {r.get('kl', 0):>10.3g}")
    return 0 if rows else 1


if __name__ == "__main__":
    raise SystemExit(main())
