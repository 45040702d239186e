"""A few DRPO RL steps on one GPU with real speed rewards (written for an H200).

    PYTHONPATH=src python3 benchmarks/gpu_rl_smoke.py \
        --programs benchmarks/programs/rl_smoke_gpu.jsonl --out "${OUT:-gpu_rl_out}"

Builds a random ``small`` Qwen2 policy (offline tokenizer) unless ``--model`` names a checkpoint,
then runs the RL loop of ``drtriton.train.rl`` on CUDA: sampling with transformers, judging
through one warm ``JudgePool`` on the GPU (correctness + eager timing, so r_s is real), DRPO
updates, checkpoints. A random model never writes a correct answer, so ``--teacher-mix`` (default
2) puts the built-in compiler's (CUDA, autotuned) answer into each group of ``--n``: the groups
have signal and the speed rewards come from real Triton kernels timed against eager PyTorch.

Needs torch, triton, transformers and tokenizers only (no trl, peft, ortools, datasets); programs
come from the JSONL file (nothing is synthesized here). Stops starting new steps when the next
one would pass ``--budget-s``. Writes OUT/metrics.jsonl, OUT/summary.json (environment, per-phase
costs, judge seconds per candidate) and OUT/checkpoint/; prints a short table last.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

import torch  # noqa: E402

from drtriton.judge import JudgeConfig, JudgePool  # noqa: E402
from drtriton.train.model import init_model  # noqa: E402
from drtriton.train.rl import RLConfig, RLRun  # noqa: E402

COLUMNS = (  # metrics key, table header
    ("step", "step"), ("level", "level"), ("loss", "loss"), ("kl", "kl"),
    ("correct_rate", "corr"), ("correct_rate_all", "corr+T"), ("frac_groups_with_signal", "signal"),
    ("mean_speedup_correct", "speedup"), ("judge_calls", "judged"), ("time_generate_s", "gen_s"),
    ("time_judge_s", "judge_s"), ("time_update_s", "upd_s"), ("time_step_s", "step_s"),
)


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--programs", required=True, help="programs JSONL (source, level, id)")
    p.add_argument("--out", default=os.environ.get("OUT", "gpu_rl_out"))
    p.add_argument("--model", default=None, help="checkpoint dir (default: random 'small' preset)")
    p.add_argument("--preset", default="small")
    p.add_argument("--steps", type=int, default=4)
    p.add_argument("--programs-per-step", type=int, default=2)
    p.add_argument("--n", type=int, default=8)
    p.add_argument("--teacher-mix", type=int, default=2)
    p.add_argument("--max-new-tokens", type=int, default=256)
    p.add_argument("--lr", type=float, default=1e-5)
    p.add_argument("--levels", default="1,2")
    p.add_argument("--all-correct", default="drop", choices=("drop", "speed"))
    p.add_argument("--judge-repetitions", type=int, default=50)
    p.add_argument("--device", default="cuda", help="cuda (the point), or cpu for a dry run")
    p.add_argument("--judge-workers", type=int, default=1,
                   help="judge sandboxes, one per visible GPU (0: all visible GPUs)")
    p.add_argument("--budget-s", type=float, default=300.0, help="stop starting steps after this")
    return p.parse_args()


def environment() -> dict:
    import transformers
    import triton

    return {
        "gpu": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None,
        "torch": torch.__version__,
        "triton": triton.__version__,
        "transformers": transformers.__version__,
        "cuda": torch.version.cuda,
    }


def table(rows: list[dict]) -> str:
    def cell(value) -> str:
        if value is None:
            return f"{'-':>9}"
        return f"{value:>9}" if isinstance(value, int) else f"{value:>9.3g}"

    lines = [" ".join(f"{h:>9}" for _, h in COLUMNS)]
    lines += [" ".join(cell(r.get(k)) for k, _ in COLUMNS) for r in rows]
    return "\n".join(lines)


def main() -> int:
    args = parse_args()
    if args.device.startswith("cuda") and not torch.cuda.is_available():
        print("error: no CUDA GPU visible", file=sys.stderr)
        return 2
    started = time.perf_counter()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    model_dir = args.model or str(init_model(out / "model", args.preset))
    config = RLConfig(
        model=model_dir, programs=args.programs, out=str(out / "rl"), max_steps=args.steps,
        programs_per_step=args.programs_per_step, n=args.n, teacher_mix=args.teacher_mix,
        max_new_tokens=args.max_new_tokens, lr=args.lr, device=args.device,
        levels=tuple(int(x) for x in args.levels.split(",")), all_correct=args.all_correct,
        judge_repetitions=args.judge_repetitions, mini_batches=min(2, args.programs_per_step),
    )
    run = RLRun(config)
    run.out.mkdir(parents=True, exist_ok=True)
    spread = args.judge_workers != 1 and args.device.startswith("cuda")
    judge_device = "cuda" if spread else ("cuda:0" if args.device.startswith("cuda") else "cpu")
    judge_config = JudgeConfig(device=judge_device, time_compile=False,
                               repetitions=args.judge_repetitions, timeout_s=120.0)
    t_pool = time.perf_counter()
    rows: list[dict] = []
    with JudgePool(judge_config, workers=args.judge_workers or None) as pool:
        pool_start_s = time.perf_counter() - t_pool
        pool_slots = pool.size
        while run.step < config.max_steps:
            elapsed = time.perf_counter() - started
            last = rows[-1]["time_step_s"] if rows else 0.0
            if rows and elapsed + 1.5 * last > args.budget_s:
                print(f"budget: stopping after step {run.step} ({elapsed:.0f} s)", flush=True)
                break
            metrics = run.run_step(pool)
            rows.append(metrics)
            print(json.dumps({k: metrics[k] for k, _ in COLUMNS}), flush=True)
    judged = sum(r["judge_calls"] for r in rows)
    summary = {
        "environment": environment(),
        "args": vars(args),
        "steps": len(rows),
        "pool_start_s": pool_start_s,
        "judge_slots": pool_slots,
        "judge_calls": judged,
        "judge_s_per_call": sum(r["time_judge_s"] for r in rows) / judged if judged else None,
        "median_step_s": statistics.median(r["time_step_s"] for r in rows) if rows else None,
        "median_generate_s": (
            statistics.median(r["time_generate_s"] for r in rows) if rows else None
        ),
        "median_update_s": statistics.median(r["time_update_s"] for r in rows) if rows else None,
        "completion_tokens": sum(r["completion_tokens"] for r in rows),
        "all_metrics_finite": all(
            isinstance(r[k], (int, float)) and r[k] == r[k] for r in rows for k in ("loss", "kl")
        ),
        "speedups_correct": [r["mean_speedup_correct"] for r in rows],
        "wall_s": time.perf_counter() - started,
    }
    (out / "summary.json").write_text(json.dumps(summary, indent=1))
    print(json.dumps({k: v for k, v in summary.items() if k != "args"}, indent=1))
    print(table(rows))
    return 0 if rows and summary["all_metrics_finite"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
