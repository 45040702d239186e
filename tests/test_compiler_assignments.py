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


def test_augmented_assignment_updates_every_name_of_the_tensor():
    """``out = h; out -= 1`` changes ``h`` too; fx's Proxy has no in-place operators, and the
    trace once made ``out`` a new tensor (the second output was off by one)."""
    body = """
h = torch.relu(a @ b)
h += 1.0
out = h
out -= 1.5
acc = torch.zeros_like(h)
first = acc
for i in range(3):
    acc += h * i
return out, h, first
"""
    check(program(body, [(4, 6), (6, 3)]), capture="fx")


def test_augmented_assignment_into_a_view_of_a_tensor_read_later():
    body = "y = a * 2\nz = y[:, :2]\nz += 1\nreturn y"
    with pytest.raises(UnsupportedOperatorError, match="view"):
        compile_program(program(body, [(3, 4)]), CompilerConfig(device="cpu", capture="fx"))
    check(program(body, [(3, 4)]))  # the default capture exports it instead


def test_strided_slice_and_single_element_assignments():
    """Every other column (a sinusoidal position encoding written in forward), a stepped range
    updated in place, and one element of a vector."""
    body = """
pos = torch.arange(a.size(0), dtype=torch.float32).unsqueeze(1)
freq = torch.exp(torch.arange(0, 8, 2).float() * -0.5)
pe = torch.zeros(a.size(0), 8)
pe[:, 0::2] = torch.sin(pos * freq)
pe[:, 1::2] = torch.cos(pos * freq)
y = a.clone()
y[:, ::2] = 0.0
y[..., 1:7:3] *= -1
v = b * 2
v[3] = 7.0
return pe + a, y, v
"""
    check(program(body, [(5, 8), (6,)]), atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("body, reason", [
    ("y = a.clone()\ny[y > 0] = a[a > 0] * 2\nreturn y", "index"),
])
def test_assignments_not_lowered_name_the_operator_and_line(body, reason):
    with pytest.raises(UnsupportedOperatorError) as err:
        compile_program(program(body, [(3, 4), (3,)]), CompilerConfig(device="cpu"))
    assert err.value.line > 0 and reason in str(err.value)


INDEXED = """
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x, idx, rows):
        y = x.clone()
        y[:, idx] = 0.0
        z = x.clone()
        z[idx] += rows
        w = torch.index_copy(x, 0, idx, rows)
        f = x.index_fill(1, idx, -1.0)
        p = x.clone().index_put_((idx,), rows, accumulate=True)
        return y, z, w * 2, f, p


def get_inputs():
    return [torch.randn(6, 6), torch.tensor([0, 2, 5]), torch.randn(3, 6)]


def get_init_inputs():
    return []
"""


def test_assignment_and_update_through_an_index_tensor():
    candidate = check(INDEXED)
    assert "_fill" in candidate  # the scatters write into a copy of x


MESSAGE_PASSING = """
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    \"\"\"Mean aggregation over edges, as graph layers are written without a graph library.\"\"\"

    def __init__(self, d, h):
        super().__init__()
        self.lin = nn.Linear(d, h)
        self.root = nn.Linear(d, h)

    def forward(self, x, edge_index):
        src, dst = edge_index[0], edge_index[1]
        msg = self.lin(x)[src]
        agg = torch.zeros(x.size(0), msg.size(1), device=x.device).index_add_(0, dst, msg)
        ones = torch.ones_like(dst, dtype=torch.float)
        deg = torch.zeros(x.size(0), device=x.device).index_add_(0, dst, ones)
        return F.relu(agg / deg.clamp(min=1).unsqueeze(-1) + self.root(x))


def get_inputs():
    return [torch.randn(6, 4), torch.randint(0, 6, (2, 40))]


def get_init_inputs():
    return [4, 5]
"""


def test_message_passing_adds_every_edge_into_its_node():
    """40 edges over 6 nodes: many adds meet at each node (atomic adds)."""
    check(MESSAGE_PASSING, atol=1e-5, rtol=1e-5)


SCATTERS = """
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, labels, logits, src, idx):
        one_hot = torch.zeros_like(logits).scatter_(1, labels.unsqueeze(1), 1.0)
        peak = torch.zeros_like(logits).scatter(1, labels.unsqueeze(1),
                                                logits.max(1, keepdim=True).values)
        summed = torch.zeros(5, src.size(1)).scatter_add(0, idx[:, None].expand_as(src), src)
        added = torch.ones(5, src.size(1)).index_add(0, idx, src, alpha=0.5)
        return (one_hot * logits).sum(1) + peak.sum(1), summed, added


def get_inputs():
    return [torch.randint(0, 5, (4,)), torch.randn(4, 5), torch.randn(7, 3),
            torch.randint(0, 5, (7,))]


def get_init_inputs():
    return []
"""


def test_scatter_scatter_add_and_index_add():
    check(SCATTERS, atol=1e-5, rtol=1e-5)


def test_scatter_with_a_reduction_is_refused_in_one_line():
    src = SCATTERS.replace("scatter_(1, labels.unsqueeze(1), 1.0)",
                           "scatter_(1, labels.unsqueeze(1), 2.0, reduce='multiply')")
    with pytest.raises(UnsupportedOperatorError, match="reduce") as err:
        compile_program(src, CompilerConfig(device="cpu"))
    assert err.value.line > 0

