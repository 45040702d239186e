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
