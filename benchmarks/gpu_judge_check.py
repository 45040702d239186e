"""GPU check of the judge on one NVIDIA GPU (written for an H200): suite + timing sanity.

    PYTHONPATH=src python3 benchmarks/gpu_judge_check.py [--out DIR]     (default $OUT or ./gpu_out)

1. Runs the whole adversarial suite and the legit candidates on CUDA; every case must get its
   expected verdict (suite timing uses fewer repetitions and no torch.compile, to fit the budget).
2. Timing check against a known case: a memory-bound elementwise kernel (x + 1 on 64 Mi fp32)
   moves 2 x 256 MiB; its time is bounded below by bytes / bandwidth. The bandwidth is measured
   here with a device-to-device copy of the same bytes. The judge's median runtime, the eager
   and torch.compile baselines and the predicted time are recorded side by side.
Writes suite.json, timing.json, summary.json and log.txt under --out; prints a short table last.
Needs no pytest, no ortools, no install (torch + triton only). Budget: under 8 minutes.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

import torch  # noqa: E402

from drtriton.judge import JudgeConfig, JudgePool  # noqa: E402
from drtriton.judge.suite import run_suite  # noqa: E402

CASES = ROOT / "tests" / "judge_cases"


def measure_copy_bandwidth(n_bytes: int, reps: int = 50) -> dict:
    """Device-to-device copy bandwidth (read + write bytes per second), median over reps."""
    src = torch.empty(n_bytes // 4, dtype=torch.float32, device="cuda").normal_()
    dst = torch.empty_like(src)
    for _ in range(5):
        dst.copy_(src)
    times = []
    for _ in range(reps):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        dst.copy_(src)
        e.record()
        torch.cuda.synchronize()
        times.append(s.elapsed_time(e))
    ms = statistics.median(times)
    return {"bytes_moved": 2 * n_bytes, "median_ms": ms, "gb_per_s": 2 * n_bytes / ms / 1e6}


def timing_check(log) -> dict:
    ref = (CASES / "timing_ref_add_one.py").read_text()
    cand = (CASES / "timing_add_one.py").read_text()
    n_bytes = (1 << 26) * 4
    bw = measure_copy_bandwidth(n_bytes)
    config = JudgeConfig(device="cuda", timeout_s=300, repetitions=100, trials=5, input_sets=3)
    with JudgePool(config, workers=1) as pool:
        verdict = pool.verify(ref, cand)
    log(f"timing verdict: {verdict.summary()}")
    predicted_ms = 2 * n_bytes / (bw["gb_per_s"] * 1e6)
    out = {"copy_bandwidth": bw, "predicted_ms": predicted_ms, "verdict": verdict.to_dict()}
    if verdict.runtime_ms:
        out["measured_over_predicted"] = verdict.runtime_ms / predicted_ms
        out["achieved_gb_per_s"] = 2 * n_bytes / verdict.runtime_ms / 1e6
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", "gpu_out")))
    parser.add_argument("--timeout-s", type=float, default=30.0)
    parser.add_argument("--only", default="", help="comma-separated case names (default: all)")
    parser.add_argument("--skip-timing", action="store_true")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    log_file = (args.out / "log.txt").open("w")

    def log(msg: str) -> None:
        print(msg, flush=True)
        log_file.write(msg + "\n")
        log_file.flush()

    if not torch.cuda.is_available():
        sys.exit("no CUDA GPU visible")
    t0 = time.monotonic()
    log(f"GPU {torch.cuda.get_device_name()} torch {torch.__version__}")
    summary: dict = {}
    try:
        config = JudgeConfig(device="cuda", timeout_s=args.timeout_s, repetitions=30, warmup_s=0.05,
                             time_compile=False)
        rows = run_suite(config, workers=1, only=[c for c in args.only.split(",") if c] or None)
        (args.out / "suite.json").write_text(json.dumps(rows, indent=1))
        cases = rows[:-1]
        for r in cases:
            log(f"{'ok  ' if r['ok'] else 'FAIL'} {r['case']:<24} expected={r['expected']:<14} "
                f"got={r['got']:<14} {r['reason'][:100] if r['ok'] else r['reason']}")
        summary["suite"] = {"as_expected": sum(r["ok"] for r in cases), "cases": len(cases),
                            "wall_s": rows[-1]["total_wall_s"],
                            "failures": [r["case"] for r in cases if not r["ok"]]}
    except Exception:
        log("suite failed:\n" + traceback.format_exc())
    log(f"[{time.monotonic() - t0:.0f} s] suite done")
    try:
        timing = timing_check(log) if not args.skip_timing else {}
        (args.out / "timing.json").write_text(json.dumps(timing, indent=1))
        summary["timing"] = timing
    except Exception:
        log("timing check failed:\n" + traceback.format_exc())
    summary["total_wall_s"] = time.monotonic() - t0
    (args.out / "summary.json").write_text(json.dumps(summary, indent=1, default=str))

    log("\n==== judge GPU check ====")
    if "suite" in summary:
        s = summary["suite"]
        log(f"suite: {s['as_expected']}/{s['cases']} as expected in {s['wall_s']:.0f} s; "
            f"failures: {', '.join(s['failures']) or 'none'}")
    if summary.get("timing"):
        t, v = summary["timing"], summary["timing"]["verdict"]
        log(f"copy bandwidth      {t['copy_bandwidth']['gb_per_s']:.0f} GB/s "
            f"(copy of 256 MiB: {t['copy_bandwidth']['median_ms']:.4f} ms)")
        log(f"predicted x+1 time  {t['predicted_ms']:.4f} ms (512 MiB moved / copy bandwidth)")
        log(f"judge verdict       {v['status']} {v['reason'][:80]}")
        if v["runtime_ms"]:
            log(f"judge runtime       {v['runtime_ms']:.4f} ms (p20 {v['runtime_p20_ms']:.4f}, "
                f"p80 {v['runtime_p80_ms']:.4f}); measured/predicted "
                f"{t['measured_over_predicted']:.3f}")
            log(f"eager / compile     {v['eager_ms']} / {v['compile_ms']} ms; speedups "
                f"{v['speedup_eager']} / {v['speedup_compile']}; suspicious={v['suspicious']}")
    log(f"total {summary['total_wall_s']:.0f} s; files in {args.out}")


if __name__ == "__main__":
    main()
