"""Randomly initialised Qwen2-architecture policies with a tokenizer built entirely offline.

``init_model(out, preset)`` trains a byte-level BPE tokenizer (``tokenizers``) on text that ships
with this package (its own Python sources, which hold the operator catalogue, the compiler's
Triton kernel templates and the prompt) plus the prompt text, attaches a ChatML chat template, and
saves a random ``Qwen2ForCausalLM`` of the preset's size next to it. No network access, no hub.

    drtriton init-model --preset tiny --out runs/tiny
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path

import drtriton
from drtriton.program import TORCH_STATE_LOCK
from drtriton.prompts import SYSTEM_PROMPT, TASK_TEMPLATE

SPECIAL_TOKENS = ("<|endoftext|>", "<|im_start|>", "<|im_end|>")
# ChatML, as Qwen2 uses it; the assistant turn ends with <|im_end|>, which is also eos.
CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)


@dataclass(frozen=True)
class ModelPreset:
    """Architecture and tokenizer size of a preset."""

    vocab_size: int
    hidden_size: int
    intermediate_size: int
    num_hidden_layers: int
    num_attention_heads: int
    num_key_value_heads: int
    max_position_embeddings: int = 16384


PRESETS = {
    "tiny": ModelPreset(1024, 64, 128, 2, 4, 2),
    "small": ModelPreset(4096, 256, 768, 4, 4, 2),
}


def corpus() -> list[str]:
    """Tokenizer training text: the package's own sources and the prompt (all local)."""
    root = Path(drtriton.__file__).parent
    texts = [p.read_text() for p in sorted(root.rglob("*.py"))]
    return texts + [SYSTEM_PROMPT, TASK_TEMPLATE]


def build_tokenizer(vocab_size: int):
    """A byte-level BPE ``PreTrainedTokenizerFast`` with ChatML special tokens and template."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    bpe = Tokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=list(SPECIAL_TOKENS),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),  # every byte encodes
        show_progress=False,
    )
    bpe.train_from_iterator(corpus(), trainer)
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=bpe,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        additional_special_tokens=["<|im_start|>"],
    )
    tokenizer.chat_template = CHAT_TEMPLATE
    return tokenizer


def init_model(out: str | Path, preset: str = "tiny", seed: int = 0) -> Path:
    """Write a random Qwen2 model and its tokenizer to ``out``; returns the directory."""
    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM

    if preset not in PRESETS:
        raise ValueError(f"unknown preset {preset!r}; choose from {', '.join(PRESETS)}")
    spec = PRESETS[preset]
    tokenizer = build_tokenizer(spec.vocab_size)
    arch = {k: v for k, v in asdict(spec).items() if k != "vocab_size"}
    config = Qwen2Config(
        vocab_size=len(tokenizer),
        tie_word_embeddings=True,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        bos_token_id=None,
        **arch,
    )
    with TORCH_STATE_LOCK:  # a seeded init: see its comment
        torch.manual_seed(seed)
        model = Qwen2ForCausalLM(config)
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    return out
