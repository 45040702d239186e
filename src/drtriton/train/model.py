"""Randomly initialised Qwen2-architecture policies with a tokenizer built entirely offline.

``train_tokenizer(out, vocab_size, corpus_files)`` trains a byte-level BPE tokenizer
(``tokenizers``) on our own text: the package's Python sources (the operator catalogue, the
compiler's Triton kernel templates, the prompt) and, from JSONL files, the ``source``,
``answer`` and ``candidate`` fields of programs, pairs and compiler candidates. It attaches a
ChatML chat template. ``init_model(out, preset)`` saves a random ``Qwen2ForCausalLM`` of the
preset's size next to such a tokenizer (trained on the package alone unless one is given), in
safetensors shards of at most ``MAX_SHARD_MB``. No network access, no hub.

    drtriton tokenizer --corpus programs.jsonl pairs.jsonl --vocab-size 8192 --out runs/tok
    drtriton init-model --preset scratch --tokenizer runs/tok --out runs/scratch
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
    # The policy trained from scratch: 12.6M parameters, 50 MB in fp32 (4 shards of <= 16 MB),
    # so a checkpoint travels to and from the GPU machine as ordinary files.
    "scratch": ModelPreset(8192, 384, 1024, 6, 6, 2, 8192),
}
MAX_SHARD_MB = 15  # safetensors shards stay under 16 MB
CORPUS_FIELDS = ("source", "answer", "candidate")


def corpus(files: list[str | Path] = ()) -> list[str]:
    """Tokenizer training text, all local: the package's own sources and the prompt, and the
    ``CORPUS_FIELDS`` strings of every record of the given JSONL files."""
    from drtriton.train.pairs import read_records

    root = Path(drtriton.__file__).parent
    texts = [p.read_text() for p in sorted(root.rglob("*.py"))] + [SYSTEM_PROMPT, TASK_TEMPLATE]
    for path in files:
        for record in read_records(path, (), "text"):
            texts += [record[k] for k in CORPUS_FIELDS if isinstance(record.get(k), str)]
    return texts


def train_tokenizer(out: str | Path, vocab_size: int, files: list[str | Path] = (),
                    split_digits: bool = True) -> Path:
    """Train the tokenizer on ``corpus(files)`` and save it to ``out``; returns the directory."""
    if vocab_size < 300:
        raise ValueError(f"vocab size must be at least 300 (256 bytes + merges), got {vocab_size}")
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    build_tokenizer(vocab_size, corpus(files), split_digits).save_pretrained(out)
    return out


def build_tokenizer(vocab_size: int, texts: list[str] | None = None, split_digits: bool = True):
    """A byte-level BPE ``PreTrainedTokenizerFast`` with ChatML special tokens and template;
    ``split_digits``: every digit its own token, so a number is spelled the same way wherever
    it appears (plain BPE cut 5497 as 5|49|7 and 5708 as 57|08: a shape the model never saw
    whole is made of pieces it rarely saw; about 11% more tokens on the compiler's answers)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    bpe = Tokenizer(models.BPE())
    byte_level = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.pre_tokenizer = (pre_tokenizers.Sequence([pre_tokenizers.Digits(individual_digits=True),
                                                  byte_level]) if split_digits else byte_level)
    bpe.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=list(SPECIAL_TOKENS),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),  # every byte encodes
        show_progress=False,
    )
    bpe.train_from_iterator(corpus() if texts is None else texts, trainer)
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=bpe,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        additional_special_tokens=["<|im_start|>"],
    )
    tokenizer.chat_template = CHAT_TEMPLATE
    return tokenizer


def init_model(out: str | Path, preset: str = "tiny", seed: int = 0,
               tokenizer_dir: str | Path | None = None) -> Path:
    """Write a random Qwen2 model and its tokenizer (``tokenizer_dir``'s, else one trained on the
    package) to ``out``; returns the directory."""
    import torch
    from transformers import AutoTokenizer, Qwen2Config, Qwen2ForCausalLM

    if preset not in PRESETS:
        raise ValueError(f"unknown preset {preset!r}; choose from {', '.join(PRESETS)}")
    spec = PRESETS[preset]
    if tokenizer_dir is None:
        tokenizer = build_tokenizer(spec.vocab_size)
    else:
        tokenizer = AutoTokenizer.from_pretrained(tokenizer_dir)
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
    model.save_pretrained(out, max_shard_size=f"{MAX_SHARD_MB}MB")
    tokenizer.save_pretrained(out)
    return out
