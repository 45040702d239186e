"""Prompt format, the tolerant answer parser, and the three policies (no network but 127.0.0.1)."""

import json
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer

import pytest

from drtriton.policy import CompilerPolicy, HFPolicy, OpenAIPolicy, Policy, Sampling, load_policy
from drtriton.prompts import AnswerParseError, build_messages, format_answer, parse_answer

CANDIDATE = "import torch\nimport triton\n\n\nclass ModelNew(torch.nn.Module):\n    pass\n"
PROGRAM = """import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.relu(x)


def get_inputs():
    return [torch.randn(4, 8)]


def get_init_inputs():
    return []
"""


def test_prompt_holds_program_and_rules():
    messages = build_messages(PROGRAM)
    assert [m["role"] for m in messages] == ["system", "user"]
    user = messages[1]["content"]
    assert PROGRAM.strip() in user
    for rule in ("ModelNew", "same constructor", "@triton.jit", "```python"):
        assert rule in user


@pytest.mark.parametrize(
    "text",
    [
        format_answer(CANDIDATE, "Fuse everything into one kernel."),
        f"```py\n{CANDIDATE}```",
        f"```\n{CANDIDATE}```",
        "Helper first:\n```python\ndef f():\n    pass\n```\n"
        f"Then:\n```python\n{CANDIDATE}```\nDone.",
        CANDIDATE,  # no fence, but the whole answer is the file
        f"Reasoning.\n```python\n{CANDIDATE}",  # truncated before the closing fence
    ],
)
def test_parse_answer_accepts(text):
    assert parse_answer(text).strip() == CANDIDATE.strip()


@pytest.mark.parametrize(
    "text, reason",
    [
        ("I would use a fused kernel.", "no fenced code block"),
        ("```python\nimport torch\nx = 1\n```", "defines class ModelNew"),
        ("```python\nclass ModelNew(torch.nn.Module:\n    pass\n```", "syntax error"),
        (f"```python\nimport numpy\n{CANDIDATE}```", "imports numpy"),
        (f"```python\nfrom reference import Model\n{CANDIDATE}```", "imports reference"),
        ("```python\ndef f():\n    class ModelNew:\n        pass\n```", "module level"),
    ],
)
def test_parse_answer_says_why(text, reason):
    with pytest.raises(AnswerParseError) as info:
        parse_answer(text)
    assert reason in info.value.reason
    assert isinstance(info.value, ValueError)


def test_compiler_policy_answers_parse_and_unsupported_says_why():
    policy = CompilerPolicy(device="cpu")
    answers = policy.generate([PROGRAM], n=2, sampling=Sampling())
    assert len(answers) == 1 and len(answers[0]) == 2
    candidate = parse_answer(answers[0][0])
    assert "@triton.jit" in candidate and "class ModelNew" in candidate
    unsupported = PROGRAM.replace("torch.relu(x)", "torch.histc(x, bins=4)")
    answer = policy.generate([unsupported], 1, Sampling())[0][0]
    assert "cannot convert" in answer
    with pytest.raises(AnswerParseError):
        parse_answer(answer)


class _InProcessPool:
    """A judge pool that runs the named child function here: enough to see what a policy asks
    the sandbox for (the judge's own tests cover the sandbox)."""

    class config:  # noqa: N801 (stands in for a JudgeConfig)
        precision = "fp32"

    def call(self, source, function, arguments, phase, gated=False) -> dict:
        import importlib

        module, _, name = function.partition(":")
        return getattr(importlib.import_module(module), name)(source, **arguments)


def test_the_compiler_policys_three_views_agree():
    policy = CompilerPolicy(device="cpu")
    answer = parse_answer(policy.generate([PROGRAM], 1, Sampling())[0][0])
    (candidate,) = policy.candidates(PROGRAM, 1, Sampling())
    first, notes = policy.first_candidate(PROGRAM, _InProcessPool())
    assert answer.strip() == candidate.strip() == first.strip()
    assert notes == {"tuned_kernels": 0, "tuning_error": "", "hybrid_choice": "",
                     "hybrid_choice_ms": {}, "tuning_cached": False}
    unsupported = PROGRAM.replace("torch.relu(x)", "torch.histc(x, bins=4)")
    assert policy.candidates(unsupported, 1, Sampling()) == []
    with pytest.raises(ValueError, match="histc"):
        policy.first_candidate(unsupported, _InProcessPool())


def test_a_model_policy_is_read_through_the_answer_parser():
    class Stub(Policy):
        def generate(self, sources, n, sampling):
            return [["no code here", format_answer(CANDIDATE)][:n] for _ in sources]

    assert Stub().candidates(PROGRAM, 2, Sampling()) == [CANDIDATE]
    with pytest.raises(AnswerParseError, match="no fenced code block"):
        Stub().first_candidate(PROGRAM, _InProcessPool())  # pass@1: the first answer counts


def test_prefetched_draws_first_answers_in_the_policys_batches():
    from drtriton.policy import Prefetched

    class Batched(Policy):
        batches, batch_size = True, 2

        def __init__(self):
            self.calls = []

        def generate(self, sources, n, sampling):
            self.calls.append((list(sources), n))
            return [[format_answer(f"{CANDIDATE}\n# answer to {s.split()[-1]}\n")] * n
                    for s in sources]

    inner = Batched()
    sources = [f"{PROGRAM}\n# p{i}\n" for i in range(5)]
    seen = []
    policy = Prefetched(inner, sources + sources[:1], progress=lambda d, t: seen.append((d, t)))
    assert [len(chunk) for chunk, _ in inner.calls] == [2, 2, 1]  # each program once
    assert seen == [(2, 5), (4, 5), (5, 5)]
    first, _ = policy.first_candidate(sources[3], _InProcessPool())
    assert first.rstrip().endswith("# answer to p3") and len(inner.calls) == 3  # read, not drawn
    policy.generate([sources[0]], 2, Sampling())  # anything else is the policy's own call
    assert inner.calls[-1] == ([sources[0]], 2)


def test_a_spec_names_the_compiler_in_the_judges_mode_and_precision():
    from drtriton.compiler.tune import default_tuning_cache

    assert load_policy("compiler", "cuda:1", "hybrid", "tf32") == CompilerPolicy(
        device="cuda", mode="hybrid", precision="tf32", tuning_cache=str(default_tuning_cache()))
    assert load_policy("openai:http://h/v1#m") == OpenAIPolicy("http://h/v1", "m")


class _FakeOpenAI(BaseHTTPRequestHandler):
    requests: list = []

    def do_POST(self):  # noqa: N802 (http.server naming)
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        self.requests.append((self.path, self.headers.get("Authorization"), body))
        # Like some servers, answer one choice per request whatever n says.
        reply = {"choices": [{"message": {"role": "assistant",
                                          "content": format_answer(CANDIDATE, body["model"])}}]}
        data = json.dumps(reply).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args):
        pass


@pytest.fixture
def fake_server():
    _FakeOpenAI.requests = []
    server = HTTPServer(("127.0.0.1", 0), _FakeOpenAI)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    server.shutdown()
    server.server_close()


def test_openai_policy_against_local_server(fake_server, monkeypatch):
    monkeypatch.setenv("TEST_KEY", "sekret")
    policy = OpenAIPolicy(fake_server, "qwen-coder", api_key_env="TEST_KEY", timeout_s=10)
    answers = policy.generate([PROGRAM, PROGRAM], n=3, sampling=Sampling(0.6, 0.9, 128, seed=1))
    assert [len(a) for a in answers] == [3, 3]
    assert parse_answer(answers[1][2]).strip() == CANDIDATE.strip()
    path, auth, body = _FakeOpenAI.requests[0]
    assert path == "/v1/chat/completions" and auth == "Bearer sekret"
    assert body["n"] == 3 and body["temperature"] == 0.6 and body["top_p"] == 0.9
    assert body["max_tokens"] == 128 and body["seed"] == 1
    assert body["messages"] == build_messages(PROGRAM)
    assert [r[2]["n"] for r in _FakeOpenAI.requests[:3]] == [3, 2, 1]  # re-asks for the rest


def test_openai_policy_unreachable_is_a_clear_error():
    policy = OpenAIPolicy("http://127.0.0.1:9/v1", "m", timeout_s=2)
    with pytest.raises(RuntimeError, match="127.0.0.1:9"):
        policy.generate([PROGRAM], 1, Sampling())


def test_hf_policy_samples_n_answers(tmp_path):
    from drtriton.train.model import init_model

    directory = init_model(tmp_path / "tiny", "tiny")
    policy = HFPolicy(str(directory), device="cpu", batch_size=2)
    answers = policy.generate([PROGRAM] * 3, n=2, sampling=Sampling(max_new_tokens=8, seed=0))
    assert [len(a) for a in answers] == [2, 2, 2]
    assert all(isinstance(t, str) for group in answers for t in group)
    again = policy.generate([PROGRAM] * 3, n=2, sampling=Sampling(max_new_tokens=8, seed=0))
    assert again == answers  # a seed makes sampling repeatable

    # one model and tokenizer shared by a bench's threads: one call at a time
    import threading

    done = []
    with policy._lock:
        worker = threading.Thread(target=lambda: done.append(
            policy.generate([PROGRAM], n=1, sampling=Sampling(max_new_tokens=2, seed=0))))
        worker.start()
        worker.join(timeout=0.5)
        assert worker.is_alive() and not done  # waits while another call holds the policy
    worker.join(timeout=60)
    assert len(done) == 1


def test_shape_notes_state_each_inputs_and_ops_shape_before_the_code():
    from drtriton.compiler.capture import capture
    from drtriton.compiler.notes import shape_notes

    source = PROGRAM.replace("torch.relu(x)", "torch.relu(x).sum(dim=1)")
    notes = shape_notes(capture(source))
    lines = notes.splitlines()
    assert lines[0].startswith("x: float32[") and lines[-1].startswith("returns ")
    assert any(line.startswith("relu = relu(x): float32[") for line in lines)
    answer = CompilerPolicy(device="cpu", shape_notes=True).generate([source], 1, Sampling())[0][0]
    assert "Shapes:\n" + notes in answer and answer.index("Shapes:") < answer.index("```python")
    plain = CompilerPolicy(device="cpu").generate([source], 1, Sampling())[0][0]
    assert parse_answer(answer) == parse_answer(plain) and "Shapes:" not in plain


def test_shape_notes_carry_each_ops_arguments_and_broadcast_alignment():
    from drtriton.compiler.capture import capture
    from drtriton.compiler.notes import shape_notes

    source = (PROGRAM.replace("def forward(self, x):", "def forward(self, x, y):")
              .replace("torch.relu(x)", "torch.sum(torch.mul(x, y), dim=-2, keepdim=True)")
              .replace("[torch.randn(4, 8)]", "[torch.randn(3, 4, 8), torch.randn(4, 1)]"))
    lines = shape_notes(capture(source)).splitlines()
    assert lines[2] == "mul = mul(x, y): float32[3, 4, 8], 96 elements; y as [1, 4, 1]"
    assert lines[3] == "sum_1 = sum(mul, dim=-2, keepdim=True): float32[3, 1, 8], 24 elements"
    layer = PROGRAM.replace("super().__init__()", "super().__init__()\n        "
                            "self.conv = nn.Conv1d(4, 2, 3, padding=1)").replace(
        "torch.relu(x)", "self.conv(x)").replace("[torch.randn(4, 8)]", "[torch.randn(1, 4, 8)]")
    conv = shape_notes(capture(layer)).splitlines()
    assert any(line.startswith("conv = Conv1d(4, 2, kernel_size=(3,), stride=(1,), padding=(1,))"
                               "(x): float32[1, 2, 8]") for line in conv), conv


def test_the_static_cache_draws_the_same_tokens_and_forced_lengths_hold(tmp_path):
    from drtriton.policy import prompt_ids, sample_token_ids
    from drtriton.train.model import init_model

    directory = init_model(tmp_path / "tiny", "tiny")
    policy = HFPolicy(str(directory), device="cpu")
    prompts = [prompt_ids(policy.tokenizer, PROGRAM), prompt_ids(policy.tokenizer, PROGRAM)[3:]]
    greedy = Sampling(temperature=0.0, max_new_tokens=12)
    grown = sample_token_ids(policy.model, policy.tokenizer, prompts, 1, greedy)
    static = sample_token_ids(policy.model, policy.tokenizer, prompts, 1, greedy, static_cache=True)
    assert static == grown
    forced = sample_token_ids(policy.model, policy.tokenizer, prompts, 1, greedy,
                              min_new_tokens=12)
    assert all(len(group[0]) == 12 for group in forced)
