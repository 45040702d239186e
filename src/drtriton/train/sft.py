"""Supervised warm-up on verified pairs with TRL's ``SFTTrainer`` (loss on the answer only).

Each pair becomes a conversational prompt-completion example: the prompt is
``drtriton.prompts.build_messages(source)`` (the same prompt RL and inference use), the completion
is the teacher's answer. TRL masks the prompt tokens (``completion_only_loss``). With ``lora``
the adapters are merged at the end, so ``out`` is always a plain checkpoint directory.
Multi-GPU: run under ``accelerate launch --config_file configs/accelerate_*.yaml``
(docs/training.md).

    drtriton sft --model runs/tiny --pairs pairs.jsonl --out runs/sft --max-steps 20
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from drtriton.prompts import build_messages
from drtriton.train.pairs import read_records


@dataclass(frozen=True)
class SFTRunConfig:
    model: str
    pairs: str
    out: str
    max_steps: int = -1  # -1: whole epochs
    epochs: float = 1.0
    batch_size: int = 4
    grad_accum: int = 1
    lr: float = 1e-5
    max_length: int = 8192
    lora: bool = False
    lora_rank: int = 16
    seed: int = 0
    bf16: bool | None = None  # None: on when CUDA is available
    # with bf16: weights and optimizer state in fp32 under bf16 autocast (a small model trained
    # from scratch, where bf16 weights lose small updates); False: weights in bf16 (a 7B model,
    # whose fp32 weights and AdamW state would not fit beside its activations)
    fp32_weights: bool = False
    # checkpoint the trainer every this many steps (0: never) and resume from the latest one
    # that ``out/trainer`` holds, so a run cut at a time limit loses at most this many steps
    save_steps: int = 0


def read_pairs(path: str | Path) -> list[dict]:
    """Pair records with ``source`` and ``answer`` strings."""
    return read_records(path, ("source", "answer"), "pair")


def to_dataset(pairs: list[dict]):
    from datasets import Dataset

    return Dataset.from_list(
        [
            {
                "prompt": build_messages(p["source"]),
                "completion": [{"role": "assistant", "content": p["answer"]}],
            }
            for p in pairs
        ]
    )


def run_sft(config: SFTRunConfig) -> dict:
    """Train and save to ``config.out``; returns the final training metrics. With
    ``config.save_steps``, resumes from the trainer's latest checkpoint under ``out/trainer``."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from transformers.trainer_utils import get_last_checkpoint
    from trl import SFTConfig, SFTTrainer

    dataset = to_dataset(read_pairs(config.pairs))
    tokenizer = AutoTokenizer.from_pretrained(config.model)
    cuda = torch.cuda.is_available()
    bf16 = cuda if config.bf16 is None else config.bf16
    weights = torch.bfloat16 if bf16 and not config.fp32_weights else torch.float32
    model = AutoModelForCausalLM.from_pretrained(config.model, dtype=weights)
    trainer_dir = Path(config.out) / "trainer"
    saving = (dict(save_strategy="steps", save_steps=config.save_steps, save_total_limit=1)
              if config.save_steps else dict(save_strategy="no"))
    args = SFTConfig(
        output_dir=str(trainer_dir),
        max_steps=config.max_steps,
        num_train_epochs=config.epochs,
        per_device_train_batch_size=config.batch_size,
        gradient_accumulation_steps=config.grad_accum,
        learning_rate=config.lr,
        max_length=config.max_length,
        completion_only_loss=True,
        packing=False,
        logging_steps=1,
        report_to=[],
        seed=config.seed,
        bf16=bf16,
        use_cpu=not cuda,
        dataloader_num_workers=0,
        disable_tqdm=False,
        **saving,
    )
    peft_config = None
    if config.lora:
        from drtriton.train.lora import lora_config

        peft_config = lora_config(config.lora_rank)
    trainer = SFTTrainer(
        model=model,
        args=args,
        train_dataset=dataset,
        processing_class=tokenizer,
        peft_config=peft_config,
    )
    last = (get_last_checkpoint(str(trainer_dir))
            if config.save_steps and trainer_dir.is_dir() else None)
    result = trainer.train(resume_from_checkpoint=last)
    trained = trainer.model
    if config.lora:
        trained = trained.merge_and_unload()  # a plain checkpoint for RL and inference
    out = Path(config.out)
    if trainer.accelerator.is_main_process:
        trained.save_pretrained(out)
        tokenizer.save_pretrained(out)
        with (out / "sft_metrics.jsonl").open("w") as f:
            for row in trainer.state.log_history:
                f.write(json.dumps(row) + "\n")
    return dict(result.metrics)
