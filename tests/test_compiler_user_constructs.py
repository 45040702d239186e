"""Constructs users' forwards are written with, in the exact spelling the coverage audit found
no converted-and-verified test for: a branch on the batch size (``if x.shape[0] > 4``), a
slice by a computed ``x.size(-1) // 2``, ``torch.tensor(c, device=x.device)`` of a Python
value, and dropout (eval mode, and p = 0) under the default capture. Each program is
compiled with the default config (strict, capture ``auto``) and compared with PyTorch in the
Triton interpreter; the other constructs of the list are covered by the tests named in the
audit report.

Run: .venv/bin/python -m pytest -q tests/test_compiler_user_constructs.py
"""

from __future__ import annotations

import os

os.environ.setdefault("TRITON_INTERPRET", "1")

import pytest  # noqa: E402

from compiler_cases.harness import check  # noqa: E402

BATCH_BRANCH = '''
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.fc = nn.Linear(dim, dim)

    def forward(self, x):
        if x.shape[0] > 4:  # large batches: a residual block
            return x + self.fc(x)
        return torch.relu(self.fc(x))


def get_inputs():
    return [torch.randn(BATCH, 8)]


def get_init_inputs():
    return [8]
'''


@pytest.mark.parametrize("batch", [6, 2])
def test_a_branch_on_the_batch_size_takes_the_traced_side(batch):
    """``if x.shape[0] > 4`` reads dim 0 (a size the shape tracer once got wrong): each batch
    size specialises the trace to its own side of the branch."""
    candidate = check(BATCH_BRANCH.replace("BATCH", str(batch)), atol=1e-5, rtol=1e-5)
    assert ("tl.maximum" in candidate) == (batch <= 4)


HALVES = '''
import torch
import torch.nn as nn


class Model(nn.Module):
    """A gated feed-forward block that splits its projection in two by hand."""

    def __init__(self, dim, hidden):
        super().__init__()
        self.up = nn.Linear(dim, 2 * hidden)
        self.down = nn.Linear(hidden, dim)

    def forward(self, x):
        h = self.up(x)
        value, gate = h[..., : h.size(-1) // 2], h[..., h.size(-1) // 2 :]
        return x + self.down(value * torch.sigmoid(gate))


def get_inputs():
    return [torch.randn(2, 5, 8)]


def get_init_inputs():
    return [8, 6]
'''


def test_slices_by_a_computed_size_of_the_last_dim():
    check(HALVES, atol=1e-5, rtol=1e-5)


TENSOR_OF_VALUES = '''
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, temperature):
        super().__init__()
        self.temperature = temperature

    def forward(self, x, scale):
        t = torch.tensor(self.temperature, device=x.device)
        s = torch.tensor(scale, device=x.device, dtype=x.dtype)
        return torch.softmax(x / t, dim=-1) * s


def get_inputs():
    return [torch.randn(3, 7), 0.25]


def get_init_inputs():
    return [0.7]
'''


def test_tensors_of_an_attribute_and_a_scalar_input_made_in_forward():
    """``torch.tensor(c, device=x.device)`` of a constructor value and of a number passed to
    forward: ModelNew keeps the signature and runs."""
    candidate = check(TENSOR_OF_VALUES, atol=1e-5, rtol=1e-5)
    assert "def forward(self, x, scale" in candidate


DROPOUT = '''
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self, dim, p, attn_p):
        super().__init__()
        self.fc1 = nn.Linear(dim, 2 * dim)
        self.fc2 = nn.Linear(2 * dim, dim)
        self.drop = nn.Dropout(p)
        self.attn_p = attn_p
        EVAL

    def forward(self, x):
        h = self.drop(F.gelu(self.fc1(x)))
        h = F.dropout(h, p=self.attn_p, training=self.training)
        return x + self.drop(self.fc2(h))


def get_inputs():
    return [torch.randn(4, 8)]


def get_init_inputs():
    return [8, P, ATTN_P]
'''


@pytest.mark.parametrize(("p", "attn_p", "eval_mode"), [
    (0.1, 0.2, True),  # an inference model: the dropouts are the identity
    (0.0, 0.0, False),  # training mode with p = 0: also the identity
], ids=["eval_mode", "p_zero_in_training"])
def test_dropout_in_eval_mode_and_with_p_zero_under_the_default_capture(p, attn_p, eval_mode):
    src = (DROPOUT.replace("EVAL", "self.eval()" if eval_mode else "pass")
           .replace("P, ATTN_P", f"{p}, {attn_p}"))
    check(src, atol=1e-5, rtol=1e-5)
