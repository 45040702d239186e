"""Per-step costs of RL at 7B scale on one GPU, measured on a random model of Qwen2.5-7B's shape.

    PYTHONPATH=src python3 benchmarks/gpu_7b_cost.py --out "${OUT:-gpu_7b_out}"

No checkpoint is reachable offline, so the model is ``Qwen2ForCausalLM`` with the architecture of
Qwen2.5-Coder-7B-Instruct (hidden 3584, 28 layers, 28 heads, 4 KV heads, MLP 18944, vocabulary
152064), randomly initialised in bf16 on the GPU. Costs depend on shapes, not weights, as long as
lengths are fixed: generation is forced to exactly ``--new-tokens`` tokens (``min_new_tokens``).

Measures, with the RL loop's own functions (``build_batch``, ``token_logps``, ``drpo_loss``):
- generation: one ``generate`` call for ``--answers`` sequences of ``--prompt-tokens`` +
  ``--new-tokens`` (transformers, bf16, KV cache), seconds and tokens per second;
- the update: no-grad log-probabilities of all answers (the old policy), then forward + backward
  in micro-batches of ``--micro-batch`` with gradient checkpointing, and one AdamW step. Weights
  and AdamW state are bf16 here (fp32 master weights, gradients and state of 7.6B parameters,
  ~122 GB, do not fit next to activations on one H200; a sharded run keeps them on several GPUs).

Writes OUT/summary.json and prints a short table last. Needs torch and transformers only.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

import torch  # noqa: E402

from drtriton.train.drpo import drpo_loss, sequence_scores  # noqa: E402
from drtriton.train.rl import build_batch, token_logps  # noqa: E402

QWEN25_7B = dict(  # config.json of Qwen2.5-Coder-7B-Instruct
    vocab_size=152064,
    hidden_size=3584,
    intermediate_size=18944,
    num_hidden_layers=28,
    num_attention_heads=28,
    num_key_value_heads=4,
    max_position_embeddings=32768,
    rope_theta=1_000_000.0,
    rms_norm_eps=1e-6,
    tie_word_embeddings=False,
)


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--out", default=os.environ.get("OUT", "gpu_7b_out"))
    p.add_argument("--answers", type=int, default=16, help="sequences generated at once")
    p.add_argument("--prompt-tokens", type=int, default=768)
    p.add_argument("--new-tokens", type=int, default=1024)
    p.add_argument("--micro-batch", type=int, default=4)
    p.add_argument("--layers", type=int, default=None, help="fewer layers: a dry run elsewhere")
    p.add_argument("--device", default="cuda")
    return p.parse_args()


def build_model(layers: int | None, device: str):
    from transformers import Qwen2Config, Qwen2ForCausalLM

    shape = dict(QWEN25_7B, num_hidden_layers=layers or QWEN25_7B["num_hidden_layers"])
    config = Qwen2Config(**shape, dtype="bfloat16")
    torch.manual_seed(0)
    previous = torch.get_default_dtype()
    torch.set_default_dtype(torch.bfloat16)
    try:
        with torch.device(device):
            model = Qwen2ForCausalLM(config)
    finally:
        torch.set_default_dtype(previous)
    return model


def sync(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def measure_generation(model, args, device: str) -> tuple[dict, list[list[int]], list[list[int]]]:
    gen = torch.Generator().manual_seed(1)
    vocab = model.config.vocab_size
    prompts = torch.randint(0, vocab - 1, (args.answers, args.prompt_tokens), generator=gen)
    model.eval()
    sync(device)
    t0 = time.perf_counter()
    with torch.no_grad():
        out = model.generate(
            input_ids=prompts.to(device),
            attention_mask=torch.ones_like(prompts).to(device),
            max_new_tokens=args.new_tokens,
            min_new_tokens=args.new_tokens,
            do_sample=True,
            temperature=0.6,
            pad_token_id=vocab - 1,
        )
    sync(device)
    seconds = time.perf_counter() - t0
    completions = out[:, args.prompt_tokens :].tolist()
    new_tokens = sum(len(c) for c in completions)
    record = {
        "generate_s": seconds,
        "generated_tokens": new_tokens,
        "generate_tokens_per_s": new_tokens / seconds,
    }
    return record, prompts.tolist(), completions


def measure_update(model, prompts, completions, args, device: str) -> dict:
    batch = build_batch(prompts, completions, pad=model.config.vocab_size - 1)
    n = len(prompts)
    rows = [list(range(s, min(s + args.micro_batch, n))) for s in range(0, n, args.micro_batch)]

    def sub(index: list[int]) -> dict:
        return {k: v[torch.tensor(index)] for k, v in batch.items()}

    sync(device)
    t0 = time.perf_counter()
    with torch.no_grad():
        old = [token_logps(model, sub(r), device) for r in rows]
    sync(device)
    old_s = time.perf_counter() - t0
    model.train()
    # transformers 5.24 renamed it; the GPU image has 5.17
    checkpointing = getattr(model, "activation_checkpointing_enable", None)
    (checkpointing or model.gradient_checkpointing_enable)()
    model.config.use_cache = False
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-6, weight_decay=0.0)
    # The DRPO gradient w.r.t. each answer's score, from a made-up correct/speed pattern: the
    # cost does not depend on its values.
    masks = [sub(r)["completion_mask"].to(device) for r in rows]
    scores = torch.cat([sequence_scores(o, m) for o, m in zip(old, masks, strict=True)])
    scores = scores.detach().float().requires_grad_(True)
    correct = torch.tensor([i % 2 == 0 for i in range(n)], device=scores.device)
    speed = torch.linspace(-0.5, 0.5, n, device=scores.device)
    group = torch.tensor([i // 8 for i in range(n)], device=scores.device)
    loss = drpo_loss(scores, correct, speed, group, 1.0, 10.0)
    (score_grad,) = torch.autograd.grad(loss, scores)
    if device.startswith("cuda"):
        torch.cuda.reset_peak_memory_stats()
    sync(device)
    t1 = time.perf_counter()
    optimizer.zero_grad(set_to_none=True)
    for r in rows:
        part = sub(r)
        mask = part["completion_mask"].to(device)
        logps = token_logps(model, part, device)
        (score_grad[r] * sequence_scores(logps, mask)).sum().backward()
    sync(device)
    t2 = time.perf_counter()
    optimizer.step()
    sync(device)
    t3 = time.perf_counter()
    peak = torch.cuda.max_memory_allocated() / 2**30 if device.startswith("cuda") else None
    tokens = n * (args.prompt_tokens + args.new_tokens)
    return {
        "old_logps_s": old_s,
        "forward_backward_s": t2 - t1,
        "optimizer_step_s": t3 - t2,
        "update_s": old_s + (t3 - t1),
        "update_tokens": tokens,
        "update_tokens_per_s": tokens / (t2 - t1),
        "peak_memory_gib": peak,
    }


def main() -> int:
    args = parse_args()
    if args.device.startswith("cuda") and not torch.cuda.is_available():
        print("error: no CUDA GPU visible", file=sys.stderr)
        return 2
    import transformers

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    model = build_model(args.layers, args.device)
    build_s = time.perf_counter() - t0
    params = sum(p.numel() for p in model.parameters())
    print(f"model: {params / 1e9:.2f}B parameters, built in {build_s:.1f} s", flush=True)
    generation, prompts, completions = measure_generation(model, args, args.device)
    print(json.dumps(generation), flush=True)
    update = measure_update(model, prompts, completions, args, args.device)
    print(json.dumps(update), flush=True)
    summary = {
        "environment": {
            "gpu": torch.cuda.get_device_name(0) if args.device.startswith("cuda") else None,
            "torch": torch.__version__,
            "transformers": transformers.__version__,
            "cuda": torch.version.cuda,
            "date": time.strftime("%Y-%m-%d"),
        },
        "args": vars(args),
        "parameters": params,
        "build_s": build_s,
        **generation,
        **update,
    }
    (out / "summary.json").write_text(json.dumps(summary, indent=1))
    print(f"\n{'answers':>8} {'prompt':>7} {'new':>6} {'gen_s':>8} {'gen_tok/s':>10} "
          f"{'upd_s':>8} {'fb_tok/s':>9} {'peak_GiB':>9}")
    peak = update["peak_memory_gib"]
    print(f"{args.answers:>8} {args.prompt_tokens:>7} {args.new_tokens:>6} "
          f"{generation['generate_s']:>8.1f} {generation['generate_tokens_per_s']:>10.0f} "
          f"{update['update_s']:>8.1f} {update['update_tokens_per_s']:>9.0f} "
          f"{peak if peak is None else round(peak, 1)!s:>9}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
