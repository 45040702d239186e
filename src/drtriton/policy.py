"""Policies: what turns a PyTorch program into candidate *answers* (text), behind one interface.

The one prompt format (``build_messages``) asks for optional reasoning plus one fenced Python block
that defines ``ModelNew``; ``parse_answer`` turns an answer into candidate source or raises
``AnswerParseError`` saying why. Three policies implement ``Policy.generate``:

* ``CompilerPolicy``: the built-in compiler (deterministic; wraps its output as an answer),
* ``HFPolicy``: a local Hugging Face causal LM checkpoint directory (transformers ``generate``),
* ``OpenAIPolicy``: any OpenAI-compatible ``/chat/completions`` endpoint (a vLLM server, ...),
  over plain HTTP with ``urllib``.

    from drtriton.policy import CompilerPolicy, Sampling, parse_answer
    answers = CompilerPolicy(device="cpu").generate([source], n=1, sampling=Sampling())
    candidate = parse_answer(answers[0][0])

Training (``drtriton.train``), conversion and search all use this module.
"""

from __future__ import annotations

import ast
import json
import os
import re
import threading
import urllib.error
import urllib.request
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from drtriton.devices import device_kind
from drtriton.program import TORCH_STATE_LOCK, parse_python

SYSTEM_PROMPT = (
    "You are an expert GPU kernel engineer. You rewrite PyTorch programs as fast, correct "
    "Triton kernels."
)

TASK_TEMPLATE = """Rewrite the PyTorch program below so that its computation runs in Triton kernels.

```python
{source}
```

Rules:
- Define `class ModelNew(torch.nn.Module)` with the same constructor arguments as `Model`; \
`forward` takes the same inputs and returns the same outputs (shapes, dtypes, values within \
tolerance).
- All computation in `forward` runs in `@triton.jit` kernels; PyTorch may only allocate \
outputs, make inputs contiguous and reshape views.
- Import only `torch` and `triton` (and their submodules). Do not import or subclass `Model`.
- Answer with optional brief reasoning, then exactly one fenced ```python block holding the \
whole file."""

ALLOWED_IMPORT_ROOTS = ("torch", "triton", "__future__")
_FENCE = re.compile(r"```[ \t]*([A-Za-z0-9_+-]*)[^\n]*\n(.*?)(?:```|\Z)", re.DOTALL)


class AnswerParseError(ValueError):
    """An answer holds no usable candidate; ``reason`` is a short explanation."""

    def __init__(self, reason: str) -> None:
        self.reason = reason
        super().__init__(reason)


@dataclass(frozen=True)
class Sampling:
    """Sampling parameters shared by all policies (the compiler ignores them)."""

    temperature: float = 0.6
    top_p: float = 1.0
    max_new_tokens: int = 2048
    seed: int | None = None


class Policy(Protocol):
    def generate(
        self, sources: Sequence[str], n: int, sampling: Sampling
    ) -> list[list[str]]:
        """``n`` candidate answers (text) for each program source, in input order."""
        ...


# ----------------------------------------------------------------------------- prompt and parser
def build_messages(source: str) -> list[dict[str, str]]:
    """The chat messages (system + user) for one program; the answer is the assistant turn."""
    return [
        {"role": "system", "content": SYSTEM_PROMPT},
        {"role": "user", "content": TASK_TEMPLATE.format(source=source.strip())},
    ]


def format_answer(candidate_source: str, reasoning: str = "") -> str:
    """An answer in the expected form: optional reasoning, then one fenced python block."""
    head = f"{reasoning.strip()}\n\n" if reasoning.strip() else ""
    return f"{head}```python\n{candidate_source.strip()}\n```"


def parse_answer(text: str) -> str:
    """Candidate source from an answer, or ``AnswerParseError`` with the reason.

    Tolerant: any fence language tag (python, py, none), several blocks (the last one that
    defines ``ModelNew`` wins), an unfenced answer that is itself a Python file, a missing
    closing fence at the very end (truncated generation) as long as the code still parses.
    """
    blocks = [(tag.lower(), body) for tag, body in _FENCE.findall(text)]
    if not blocks:
        if "class ModelNew" in text and _parses(text):
            return _checked(text)
        raise AnswerParseError("no fenced code block")
    code_blocks = [b for t, b in blocks if t in ("", "python", "py", "python3")] or [
        b for _, b in blocks
    ]
    defining = [b for b in code_blocks if re.search(r"^\s*class\s+ModelNew\b", b, re.M)]
    if not defining:
        raise AnswerParseError("no code block defines class ModelNew")
    return _checked(defining[-1])


def _parses(source: str) -> bool:
    try:
        parse_python(source)
    except SyntaxError:
        return False
    return True


def _checked(source: str) -> str:
    source = source.strip() + "\n"
    try:
        tree = parse_python(source)
    except SyntaxError as exc:
        raise AnswerParseError(f"syntax error: {exc.msg} (line {exc.lineno})") from None
    if not any(isinstance(n, ast.ClassDef) and n.name == "ModelNew" for n in tree.body):
        raise AnswerParseError("class ModelNew is not defined at module level")
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            names = [node.module or "."]
        else:
            continue
        bad = [m for m in names if m.split(".")[0] not in ALLOWED_IMPORT_ROOTS]
        if bad:
            raise AnswerParseError(f"imports {bad[0]} (only torch and triton are allowed)")
    return source


# ----------------------------------------------------------------------------- the compiler
@dataclass(frozen=True)
class CompilerPolicy:
    """The built-in compiler as a policy: one deterministic answer, repeated ``n`` times.

    A program it cannot lower gets an answer without code that says why (it fails to parse).
    """

    device: str = "cpu"  # cpu: interpreter blocks; cuda: autotuned kernels
    mode: str = "strict"

    def answer(self, source: str) -> str:
        from drtriton.compiler import CompilerConfig, UnsupportedOperatorError, compile_program

        try:
            candidate = compile_program(source, CompilerConfig(mode=self.mode, device=self.device))
        except UnsupportedOperatorError as exc:
            return f"The built-in compiler cannot convert this program: {exc}"
        return format_answer(candidate, "Translation by drtriton's built-in compiler.")

    def generate(self, sources: Sequence[str], n: int, sampling: Sampling) -> list[list[str]]:
        return [[self.answer(s)] * n for s in sources]


# ----------------------------------------------------------------------------- local HF model
def prompt_ids(tokenizer: Any, source: str) -> list[int]:
    """Token ids of the prompt, ending with the assistant header (generation prompt)."""
    ids = tokenizer.apply_chat_template(
        build_messages(source), add_generation_prompt=True, tokenize=True
    )
    # transformers 5 may return a BatchEncoding; older versions a plain list.
    return list(ids["input_ids"] if hasattr(ids, "keys") else ids)


def sample_token_ids(
    model: Any, tokenizer: Any, prompts: Sequence[list[int]], n: int, sampling: Sampling
) -> list[list[list[int]]]:
    """Sample ``n`` completions (token ids, eos included when produced) per prompt.

    Prompts are left-padded into one batch; ``model`` may be on any device.
    """
    import torch

    device = next(model.parameters()).device
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
    width = max(len(p) for p in prompts)
    ids = torch.full((len(prompts), width), pad, dtype=torch.long)
    mask = torch.zeros_like(ids)
    for i, p in enumerate(prompts):
        ids[i, width - len(p):] = torch.tensor(p)
        mask[i, width - len(p):] = 1
    # Sampling draws from torch's default generator, which a judge thread in this process seeds
    # for its inputs: generation holds the process lock (see TORCH_STATE_LOCK), even unseeded.
    with TORCH_STATE_LOCK:
        if sampling.seed is not None:
            torch.manual_seed(sampling.seed)
        was_training = model.training
        model.eval()
        with torch.no_grad():
            out = model.generate(
                input_ids=ids.to(device),
                attention_mask=mask.to(device),
                do_sample=sampling.temperature > 0,
                temperature=sampling.temperature if sampling.temperature > 0 else None,
                top_p=sampling.top_p,
                max_new_tokens=sampling.max_new_tokens,
                num_return_sequences=n,
                pad_token_id=pad,
                eos_token_id=tokenizer.eos_token_id,
            )
        model.train(was_training)
    completions = out[:, width:].tolist()
    result = []
    for i in range(len(prompts)):
        group = []
        for seq in completions[i * n:(i + 1) * n]:
            if tokenizer.eos_token_id in seq:
                seq = seq[: seq.index(tokenizer.eos_token_id) + 1]
            group.append(seq)
        result.append(group)
    return result


class HFPolicy:
    """A local Hugging Face causal LM (checkpoint directory) sampled with transformers."""

    def __init__(self, model_dir: str, device: str = "cpu", batch_size: int = 4) -> None:
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        if not os.path.isdir(model_dir):  # transformers would read it as a Hub repo id
            raise FileNotFoundError(f"no model directory {model_dir} (a local checkpoint)")
        self.tokenizer = AutoTokenizer.from_pretrained(model_dir)
        dtype = torch.bfloat16 if device.startswith("cuda") else torch.float32
        self.model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=dtype).to(device)
        self.batch_size = batch_size
        # One model and one tokenizer serve every thread of a bench: one call at a time (a fast
        # tokenizer used by two threads at once raises "Already borrowed", huggingface/tokenizers
        # issue 537; sampling is serialised by TORCH_STATE_LOCK anyway).
        self._lock = threading.Lock()

    def generate(self, sources: Sequence[str], n: int, sampling: Sampling) -> list[list[str]]:
        with self._lock:
            return self._generate(sources, n, sampling)

    def _generate(self, sources: Sequence[str], n: int, sampling: Sampling) -> list[list[str]]:
        answers: list[list[str]] = []
        for start in range(0, len(sources), self.batch_size):
            chunk = sources[start:start + self.batch_size]
            prompts = [prompt_ids(self.tokenizer, s) for s in chunk]
            for group in sample_token_ids(self.model, self.tokenizer, prompts, n, sampling):
                answers.append(
                    [self.tokenizer.decode(c, skip_special_tokens=True) for c in group]
                )
        return answers


# ----------------------------------------------------------------------------- OpenAI-compatible
@dataclass(frozen=True)
class OpenAIPolicy:
    """Any OpenAI-compatible chat endpoint, e.g. ``http://127.0.0.1:8000/v1`` (vLLM).

    The key is read from the environment variable named by ``api_key_env`` (may be unset for
    local servers). Servers that ignore ``n`` are asked again until ``n`` answers arrived.
    """

    base_url: str
    model: str
    api_key_env: str = "OPENAI_API_KEY"
    timeout_s: float = 600.0

    def _post(self, payload: dict) -> dict:
        url = self.base_url.rstrip("/") + "/chat/completions"
        headers = {"Content-Type": "application/json"}
        key = os.environ.get(self.api_key_env)
        if key:
            headers["Authorization"] = f"Bearer {key}"
        request = urllib.request.Request(url, json.dumps(payload).encode(), headers)
        try:
            with urllib.request.urlopen(request, timeout=self.timeout_s) as response:
                return json.loads(response.read())
        except urllib.error.HTTPError as exc:
            body = exc.read().decode(errors="replace")[:200]
            raise RuntimeError(f"{url}: HTTP {exc.code}: {body}") from None
        except urllib.error.URLError as exc:
            raise RuntimeError(f"{url}: {exc.reason}") from None

    def _complete(self, source: str, n: int, sampling: Sampling) -> list[str]:
        answers: list[str] = []
        while len(answers) < n:
            payload = {
                "model": self.model,
                "messages": build_messages(source),
                "n": n - len(answers),
                "temperature": sampling.temperature,
                "top_p": sampling.top_p,
                "max_tokens": sampling.max_new_tokens,
            }
            if sampling.seed is not None:
                payload["seed"] = sampling.seed
            choices = self._post(payload).get("choices") or []
            if not choices:
                raise RuntimeError(f"{self.base_url}: response has no choices")
            answers += [c.get("message", {}).get("content") or "" for c in choices]
        return answers[:n]

    def generate(self, sources: Sequence[str], n: int, sampling: Sampling) -> list[list[str]]:
        return [self._complete(s, n, sampling) for s in sources]


def parse_policy_spec(spec: str) -> tuple[str, tuple[str, ...]]:
    """``compiler``, ``hf:MODEL_DIR`` or ``openai:BASE_URL#MODEL`` -> (kind, arguments)."""
    kind, _, rest = spec.partition(":")
    if spec == "compiler":
        return "compiler", ()
    if kind == "hf" and rest:
        return "hf", (rest,)
    if kind == "openai" and "#" in rest:
        url, _, model = rest.rpartition("#")
        return "openai", (url, model)
    raise ValueError(
        f"unknown policy {spec!r}; use compiler, hf:MODEL_DIR or openai:BASE_URL#MODEL"
    )


def load_policy(spec: str, device: str = "cpu") -> Policy:
    """The policy a spec names (see ``parse_policy_spec``), on ``device``."""
    kind, args = parse_policy_spec(spec)
    if kind == "compiler":
        return CompilerPolicy(device=device_kind(device))
    if kind == "hf":
        return HFPolicy(args[0], device=device)
    return OpenAIPolicy(*args)
