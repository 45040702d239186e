"""Whole small models written the way their authors write them (inference: each constructor
ends with ``self.eval()``), at tiny sizes: each converts and matches PyTorch in the interpreter,
or is refused in one line naming the operator. A candidate that crashes or differs fails."""

from __future__ import annotations

import os

os.environ.setdefault("TRITON_INTERPRET", "1")

from pathlib import Path  # noqa: E402

import pytest  # noqa: E402

from compiler_cases.harness import check  # noqa: E402
from drtriton.compiler import CompilerConfig, UnsupportedOperatorError, compile_program  # noqa: E402

MODELS = sorted((Path(__file__).parent / "compiler_cases" / "models").glob("*.py"))

# The models the compiler still refuses, with the operator it names. A model that starts to
# convert fails here until it is removed from this table (and then must match PyTorch).
REFUSED: dict[str, str] = {}


@pytest.mark.parametrize("mode", ["strict", pytest.param("hybrid", marks=pytest.mark.slow)])
@pytest.mark.parametrize("path", MODELS, ids=lambda p: p.stem)
def test_a_whole_model_converts_and_matches_or_is_refused_by_name(path, mode):
    source = path.read_text()
    if path.stem not in REFUSED:
        check(source, mode, atol=1e-4, rtol=1e-4)
        return
    with pytest.raises(UnsupportedOperatorError) as refused:
        compile_program(source, CompilerConfig(mode=mode, device="cpu"))
    message = str(refused.value)
    assert REFUSED[path.stem] in message and "\n" not in message


def test_the_model_set_is_large_and_mostly_converts():
    assert len(MODELS) >= 30 and len(REFUSED) <= len(MODELS) // 4
