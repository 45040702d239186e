"""Whole-program verdicts of the compiler's two window-prologue settings, read from a search cache.

    .venv/bin/python benchmarks/recompute_ab.py PROGRAMS.jsonl CACHE.sqlite --mode hybrid \
        [--gpu "NVIDIA H200" --torch 2.11.0+cu130 --triton 3.6.0] [--out AB.json]

A fragment search (``drtriton bench --search``) judges every whole-program candidate of the
compiler, among them the default translation (``max_window_recompute=64``: a costly input of a
pool, convolution or strict matmul is materialised first) and the fused one (``inf``: the
translation before that setting existed). This script compiles both again on the CPU (CUDA
emission; nothing runs), finds their verdicts in the cache and prints them side by side. Each
speedup is measured against eager in its own verdict; their ratio is the effect of the setting.
"""

from __future__ import annotations

import argparse
import json
import sys
from datetime import date

from drtriton.compiler import CompilerConfig, compile_program, kernel_body
from drtriton.judge import JudgeConfig
from drtriton.search.verdict_cache import VerdictCache, judging_settings

SETTINGS = {"default": CompilerConfig().max_window_recompute, "fused": float("inf")}


def ab_rows(programs: list[dict], cache: VerdictCache, judge_mode: str) -> list[dict]:
    """One row per program and translation mode (a hybrid judge's search also judged the strict
    translations)."""
    settings = judging_settings(JudgeConfig(preset="hardened", mode=judge_mode, device="cuda"))
    rows = []
    modes = ("strict", "hybrid") if judge_mode == "hybrid" else ("strict",)
    for program, mode in ((p, m) for p in programs for m in modes):
        if mode == "hybrid" and _no_vendor_call(program["source"]):
            continue  # the hybrid translation is the strict one: the search did not judge it again
        row = {"problem": f"L{program['level']}-{program['index']}", "id": program["id"],
               "translation": mode, "ops": " ".join(program["ops"])}
        texts = {name: compile_program(program["source"], CompilerConfig(mode=mode, device="cuda",
                                                                          max_window_recompute=value))
                 for name, value in SETTINGS.items()}
        for name, text in texts.items():
            verdict = cache.get(f"{settings}\0{program['source']}", text)
            row[f"{name}_status"] = verdict.status if verdict else "not judged"
            row[f"{name}_ms"] = verdict.runtime_ms if verdict and verdict.ok else None
            row[f"{name}_vs_eager"] = verdict.speedup_eager if verdict and verdict.ok else None
            if verdict is not None:
                row["machine"] = {
                    k: verdict.environment.get(k) for k in ("device_name", "torch", "triton")
                }
        row["same_translation"] = texts["default"] == texts["fused"]
        if row["default_vs_eager"] and row["fused_vs_eager"]:
            row["default_over_fused"] = row["default_vs_eager"] / row["fused_vs_eager"]
        rows.append(row)
    return rows


def _no_vendor_call(source: str) -> bool:
    strict, hybrid = (kernel_body(compile_program(source, CompilerConfig(mode=m, device="cuda")))
                      for m in ("strict", "hybrid"))
    return strict == hybrid


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("programs")
    parser.add_argument("cache")
    parser.add_argument("--mode", choices=("strict", "hybrid"), required=True)
    parser.add_argument("--gpu", default="NVIDIA H200")
    parser.add_argument("--torch", default="2.11.0+cu130")
    parser.add_argument("--triton", default="3.6.0")
    parser.add_argument("--out")
    args = parser.parse_args()
    programs = [json.loads(line) for line in open(args.programs) if line.strip()]
    # the search's cache salt (drtriton.search.engine.cache_environment), as the GPU run wrote it
    environment = {"gpu": args.gpu, "torch": args.torch, "triton": args.triton,
                   "preset": "hardened", "mode": args.mode}
    rows = ab_rows(programs, VerdictCache(args.cache, environment), args.mode)
    for row in rows:
        print(json.dumps(row))
    if args.out:
        json.dump({"mode": args.mode, "cache": args.cache, "read_on": date.today().isoformat(),
                   "rows": rows}, open(args.out, "w"), indent=1)
    if not any(r["default_status"] != "not judged" for r in rows):
        sys.exit("no default translation found in the cache: wrong salt (gpu, torch, triton)?")


if __name__ == "__main__":
    main()
