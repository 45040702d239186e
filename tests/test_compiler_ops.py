"""Every catalogue operator (level 1) converts and matches the reference in strict mode.

Run: .venv/bin/python -m pytest -q tests/test_compiler_ops.py   (Triton interpreter, CPU, ~5 s)
"""

from __future__ import annotations

import os

os.environ.setdefault("TRITON_INTERPRET", "1")

import pytest  # noqa: E402

from compiler_cases.harness import check  # noqa: E402
from compiler_cases.ops61 import CASES, source  # noqa: E402


def test_catalogue_has_61_operators():
    assert len(CASES) == 61


@pytest.mark.parametrize("name", sorted(CASES))
def test_operator_strict(name):
    candidate = check(source(name), mode="strict")
    assert "@triton.jit" in candidate


@pytest.mark.parametrize("name", ["matmul", "bmm", "conv2d", "conv_transpose1d", "conv3d"])
def test_lone_vendor_ops_in_hybrid_mode_compile_strict(name):
    # Alone, a vendor op would leave no Triton launch (the judge rejects that): compiled strict.
    # With Triton work around it, hybrid keeps it in the vendor library (test_compiler.py).
    candidate = check(source(name), mode="hybrid")
    assert "@triton.jit" in candidate and "mode: strict" in candidate
