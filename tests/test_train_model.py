"""The offline tiny model: tokenizer round trip, chat template, loads with transformers."""

from drtriton.prompts import build_messages, format_answer


def test_init_model_tiny_is_offline_and_loadable(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")  # any hub access would fail
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from drtriton.train.model import PRESETS, init_model

    directory = init_model(tmp_path / "tiny", "tiny")
    tokenizer = AutoTokenizer.from_pretrained(directory)
    model = AutoModelForCausalLM.from_pretrained(directory)
    assert model.config.model_type == "qwen2"
    assert model.config.hidden_size == PRESETS["tiny"].hidden_size
    assert model.config.vocab_size == len(tokenizer) <= PRESETS["tiny"].vocab_size
    text = (
        "@triton.jit\ndef k(x_ptr, BLOCK: tl.constexpr):\n    offs = tl.arange(0, BLOCK)  # é ∑\n"
    )
    assert tokenizer.decode(tokenizer(text)["input_ids"]) == text  # byte-level: lossless
    prompt = tokenizer.apply_chat_template(build_messages("x = 1"), add_generation_prompt=True,
                                           tokenize=False)
    assert prompt.endswith("<|im_start|>assistant\n") and "x = 1" in prompt
    assert tokenizer.eos_token == "<|im_end|>" and tokenizer.pad_token_id != tokenizer.eos_token_id
    answer = tokenizer(format_answer("class ModelNew: pass"))["input_ids"]
    out = model(input_ids=__import__("torch").tensor([answer]))
    assert out.logits.shape[-1] == model.config.vocab_size


def test_a_tokenizer_trained_on_our_corpus_encodes_its_text_more_tightly(tmp_path):
    import json

    from transformers import AutoTokenizer

    from drtriton.train.model import train_tokenizer

    line = "qzv_fused_kernel_qzv(qzv_ptr, QZV_BLOCK)"  # nowhere in the package's sources
    corpus = tmp_path / "pairs.jsonl"
    corpus.write_text("".join(json.dumps({"source": "x", "answer": line * 3}) + "\n"
                              for _ in range(200)))
    plain = AutoTokenizer.from_pretrained(train_tokenizer(tmp_path / "plain", 1024))
    ours = AutoTokenizer.from_pretrained(train_tokenizer(tmp_path / "ours", 1024, [corpus]))
    assert len(ours(line)["input_ids"]) < len(plain(line)["input_ids"])
    assert ours.decode(ours(line)["input_ids"]) == line


def test_every_digit_is_its_own_token_unless_asked_otherwise(tmp_path):
    import json

    from transformers import AutoTokenizer

    from drtriton.train.model import train_tokenizer

    line = "buf = torch.empty((1, 5708, 5497)); k0[(4,)](x, 31376876, BLOCK=1024)"
    corpus = tmp_path / "pairs.jsonl"
    corpus.write_text("".join(json.dumps({"source": "x", "answer": line * 3}) + "\n"
                              for _ in range(200)))
    split = AutoTokenizer.from_pretrained(train_tokenizer(tmp_path / "split", 1024, [corpus]))
    whole = AutoTokenizer.from_pretrained(train_tokenizer(tmp_path / "whole", 1024, [corpus],
                                                          split_digits=False))
    digits = [t for t in split.tokenize(line) if any(ch.isdigit() for ch in t)]
    assert digits and all(len(t.lstrip("Ġ")) == 1 for t in digits), digits
    assert any(len(t.lstrip("Ġ")) > 1 and t.lstrip("Ġ").isdigit() for t in whole.tokenize(line))
    assert split.decode(split(line)["input_ids"]) == line


def test_the_scratch_preset_travels_as_small_files(tmp_path):
    from drtriton.train.model import MAX_SHARD_MB, PRESETS, init_model, train_tokenizer

    tokenizer = train_tokenizer(tmp_path / "tok", PRESETS["scratch"].vocab_size)
    directory = init_model(tmp_path / "scratch", "scratch", tokenizer_dir=tokenizer)
    sizes = {p.name: p.stat().st_size for p in directory.iterdir()}
    assert sum(sizes.values()) <= 60 * 2**20, sizes
    assert max(sizes.values()) <= 16 * 2**20, sizes
    assert max(sizes.values()) <= (MAX_SHARD_MB + 1) * 10**6
    assert any(name.endswith(".safetensors") for name in sizes)


def test_tokenizer_command_names_a_bad_corpus_line(tmp_path):
    from typer.testing import CliRunner

    from drtriton.cli import app

    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"source": "x"}\nnot json\n')
    done = CliRunner().invoke(app, ["tokenizer", "--out", str(tmp_path / "t"), "--corpus",
                                    str(bad), "--vocab-size", "512"])
    assert done.exit_code == 2 and "bad.jsonl:2" in done.output
