"""Assignments into tensors, written the way model code writes them: into a slice, a selected
row or column, through a boolean mask, and chains of in-place methods. ``torch.fx`` cannot trace
an item assignment; the default capture then exports the forward, where each assignment is a
functional ``slice_scatter``, ``select_scatter``, ``copy`` or ``index_put``. Each program is
compiled with the default config and compared with PyTorch in the Triton interpreter.

Run: .venv/bin/python -m pytest -q tests/test_compiler_assignments.py
"""

from __future__ import annotations

import os

os.environ.setdefault("TRITON_INTERPRET", "1")

import pytest  # noqa: E402

from compiler_cases.harness import check, program  # noqa: E402
from drtriton.compiler import CompilerConfig, UnsupportedOperatorError, compile_program  # noqa: E402,I001


def test_slice_and_column_assignments():
    body = """
out = torch.zeros(a.size(0), 8, device=a.device)
out[:, 2:5] = a
out[:, 5:] = b * 2
out[..., 0] += 1.0
out[:, -1] = 7.0
return out
"""
    check(program(body, [(3, 3), (3, 3)]))


def test_row_assignment_of_a_vector_into_a_3d_tensor():
    body = """
y = a.clone()
y[:, 1] = b
y[0] = 0
return y * 2
"""
    check(program(body, [(2, 3, 4), (2, 4)]))


def test_boolean_mask_assignment_and_masked_rows():
    check(program("y = a.clone()\ny[y < 0] = 0.0\nreturn y + 1", [(4, 5)]))
    body = """
y = a.clone()
keep = a.sum(-1) > 0
y[keep] = b
return y
"""
    check(program(body, [(6, 5), (5,)]))


def test_chained_in_place_methods_update_the_tensor():
    body = """
y = torch.relu(a @ b)
y.mul_(0.5).add_(1.0)
y.clamp_(max=2.0)
return y
"""
    check(program(body, [(4, 6), (6, 3)]))


@pytest.mark.parametrize("body, reason", [
    ("y = a.clone()\ny[:, ::2] = 0.0\nreturn y", "strided slice"),
    ("y = a.clone()\ny[y > 0] = a[a > 0] * 2\nreturn y", "index"),
])
def test_assignments_not_lowered_name_the_operator_and_line(body, reason):
    with pytest.raises(UnsupportedOperatorError) as err:
        compile_program(program(body, [(3, 4), (3,)]), CompilerConfig(device="cpu"))
    assert err.value.line > 0 and reason in str(err.value)


INTEGER_INDEX = """
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x, idx):
        y = x.clone()
        y[:, idx] = 0.0
        return y


def get_inputs():
    return [torch.randn(3, 6), torch.tensor([0, 2, 5])]


def get_init_inputs():
    return []
"""


def test_assignment_through_an_index_tensor_is_refused_in_one_line():
    with pytest.raises(UnsupportedOperatorError, match="integer indices") as err:
        compile_program(INTEGER_INDEX, CompilerConfig(device="cpu"))
    assert err.value.line == 9 and "y[:, idx] = 0.0" in str(err.value)
