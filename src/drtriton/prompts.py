"""The prompt and answer format every model sees: one task prompt, one tolerant answer parser.

``build_messages`` asks for optional reasoning plus one fenced Python block that defines
``ModelNew``; ``format_answer`` writes an answer in that form (the compiler's answers, SFT
targets); ``parse_answer`` turns an answer into candidate source or raises ``AnswerParseError``
saying why. The policies (``drtriton.policy``), training (``drtriton.train``) and the benchmark
all use this one format, so a model is trained on exactly the prompt it is evaluated with.

    from drtriton.prompts import build_messages, parse_answer
    messages = build_messages(source)
    candidate = parse_answer(answer_text)
"""

from __future__ import annotations

import ast
import re

from drtriton.program import parse_python

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
