"""How fast a local model draws answers: transformers' ``generate`` through the policy's own
``sample_token_ids``, the default growing KV cache against the static one, per batch size.

    PYTHONPATH=src python3 benchmarks/generation_speed.py --model runs/learning/sft \\
        --programs benchmarks/programs/learning_heldout_l1_l2_l5.jsonl --out $OUT/gen.json

Every answer is forced to ``--new-tokens`` tokens, so rows compare equal work; the first call of
each setting is a warm-up (and, for the static cache on CUDA, its compilation) and is reported
apart. Without ``--model`` a random model of ``--preset`` is made with a tokenizer of the
programs. Writes one JSON with the machine record and a row per (cache, batch).
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="")
    parser.add_argument("--preset", default="scratch")
    parser.add_argument("--programs", required=True)
    parser.add_argument("--batches", default="64,300")
    parser.add_argument("--new-tokens", type=int, default=512)
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    rows = [json.loads(line) for line in Path(args.programs).read_text().splitlines() if line]
    model, tokenizer = _load(args.model, args.preset, args.programs)
    model = model.to(args.device)
    results = []
    for batch in (int(b) for b in args.batches.split(",")):
        sources = [rows[i % len(rows)]["source"] for i in range(batch)]
        for static in (False, True):
            first, again = (_timed(model, tokenizer, sources, static, args.new_tokens, args.device)
                            for _ in range(2))
            results.append({"batch": batch, "cache": "static" if static else "dynamic",
                            "new_tokens": args.new_tokens, "first_s": round(first, 3),
                            "s": round(again, 3),
                            "tokens_per_s": round(batch * args.new_tokens / again, 1)})
            print(json.dumps(results[-1]), flush=True)
    from drtriton.provenance import machine_record

    Path(args.out).write_text(json.dumps({"machine": machine_record(), "rows": results},
                                         indent=1))
    for r in results:
        print(f"{r['cache']:>8} batch {r['batch']:>4}: {r['s']:8.2f} s "
              f"({r['tokens_per_s']:9.1f} tokens/s; first {r['first_s']:.1f} s)")


def _load(model_dir: str, preset: str, programs: str):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    if not model_dir:
        from drtriton.train.model import init_model, train_tokenizer

        folder = Path(tempfile.mkdtemp(prefix="drtriton-gen-"))
        train_tokenizer(folder / "tok", 8192, [programs])
        model_dir = str(init_model(folder / "model", preset, 0, folder / "tok"))
    return AutoModelForCausalLM.from_pretrained(model_dir), AutoTokenizer.from_pretrained(model_dir)


def _timed(model, tokenizer, sources, static: bool, new_tokens: int, device: str) -> float:
    import torch

    from drtriton.policy import Sampling, prompt_ids, sample_token_ids

    prompts = [prompt_ids(tokenizer, s) for s in sources]
    sampling = Sampling(temperature=0.6, max_new_tokens=new_tokens, seed=0)
    if device.startswith("cuda"):
        torch.cuda.synchronize()
    started = time.perf_counter()
    sample_token_ids(model, tokenizer, prompts, 1, sampling, static_cache=static,
                     min_new_tokens=new_tokens)
    if device.startswith("cuda"):
        torch.cuda.synchronize()
    return time.perf_counter() - started


if __name__ == "__main__":
    main()
