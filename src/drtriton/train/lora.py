"""LoRA adapters shared by SFT and RL (peft): one rank rule, all linear layers.

RL with ``lora=True`` keeps the base weights frozen (bf16 on a GPU) and trains fp32 adapters, so a
7B policy, its adapters and their AdamW state fit on one GPU; checkpoints hold the adapters, and
``merged`` writes a plain transformers checkpoint at the end of a run.
"""

from __future__ import annotations

from pathlib import Path


def lora_config(rank: int):
    """Adapters on every linear layer, alpha = 2 x rank (peft ``LoraConfig``)."""
    from peft import LoraConfig

    if rank < 1:
        raise ValueError(f"lora rank must be >= 1, got {rank}")
    return LoraConfig(
        r=rank, lora_alpha=2 * rank, target_modules="all-linear", task_type="CAUSAL_LM"
    )


def with_adapters(model, rank: int, adapters: Path | None = None):
    """``model`` wrapped with trainable adapters: new ones, or those saved in ``adapters``."""
    from peft import PeftModel, get_peft_model

    if adapters is not None:
        return PeftModel.from_pretrained(model, str(adapters), is_trainable=True)
    return get_peft_model(model, lora_config(rank))


def is_adapter_dir(path: Path) -> bool:
    return (Path(path) / "adapter_config.json").exists()
