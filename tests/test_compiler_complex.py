"""Complex tensors: a rotary embedding written with complex products, as LLaMA's reference code
writes it (``view_as_complex`` of (even, odd) pairs, a product with a complex ``freqs_cis``
buffer made by ``torch.polar``, ``view_as_real``). The candidate keeps real and imaginary parts
as two real expressions and reads the buffer through ``torch.view_as_real``.

Run: .venv/bin/python -m pytest -q tests/test_compiler_complex.py
"""

from __future__ import annotations

import os

os.environ.setdefault("TRITON_INTERPRET", "1")

from pathlib import Path  # noqa: E402

import pytest  # noqa: E402

from compiler_cases.harness import check, program  # noqa: E402
from drtriton.compiler import CompilerConfig, UnsupportedOperatorError, compile_program  # noqa: E402,I001

LLAMA = (Path(__file__).parent / "compiler_cases" / "llama_complex_rope.py").read_text()


def test_llama_attention_with_complex_rotary_embedding():
    candidate = check(LLAMA, atol=1e-5, rtol=1e-5)
    assert "torch.view_as_real(self.freqs_cis)" in candidate


def test_llama_attention_verifies_in_the_judge():
    """The candidate reads the complex buffer through ``torch.view_as_real``, a view the
    judge's op record allows in ``forward``."""
    from drtriton.judge import JudgeConfig, verify

    candidate = compile_program(LLAMA, CompilerConfig(device="cpu"))
    assert verify(LLAMA, candidate, JudgeConfig(device="cpu")).status == "correct"


def test_complex_made_in_forward():
    body = """
z = torch.complex(a, b) * torch.polar(torch.ones_like(a), b)
w = torch.view_as_complex(torch.stack([a, b], dim=-1)) + z
return torch.view_as_real(w * 2.0 - z), z.real, z.imag
"""
    check(program(body, [(3, 4), (3, 4)]), atol=1e-5, rtol=1e-5)


def test_complex_constant_made_in_forward():
    """Rotary frequencies made in ``forward`` (``torch.polar`` of constants) fold to a complex
    tensor constant: it becomes two real constants, not one read as real (the candidate read
    the complex buffer as float and crashed at run time)."""
    body = """
t = torch.arange(4).float()
freqs = torch.polar(torch.ones(4), t * 0.5)
return torch.view_as_real(torch.view_as_complex(a.reshape(2, 4, 2)) * freqs)
"""
    check(program(body, [(2, 8)]), atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("body, reason", [
    ("return torch.view_as_complex(torch.stack([a, b], -1)).abs()", "complex"),
    ("return torch.view_as_complex(torch.stack([a, b], -1)) / 2.0", "complex"),
    ("return torch.complex(a, b) * 2", "complex output"),
])
def test_complex_ops_not_lowered_are_refused_in_one_line(body, reason):
    with pytest.raises(UnsupportedOperatorError, match=reason) as err:
        compile_program(program(body, [(3, 4), (3, 4)]), CompilerConfig(device="cpu"))
    assert err.value.line > 0
