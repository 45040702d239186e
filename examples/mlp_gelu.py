"""A two-layer MLP with GELU (KernelBench format). Convert: drtriton convert examples/mlp_gelu.py"""

import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self, d_model, d_hidden):
        super().__init__()
        self.fc1 = nn.Linear(d_model, d_hidden)
        self.fc2 = nn.Linear(d_hidden, d_model)

    def forward(self, x):
        return self.fc2(F.gelu(self.fc1(x)))


batch, d_model, d_hidden = 8, 32, 64


def get_inputs():
    return [torch.randn(batch, d_model)]


def get_init_inputs():
    return [d_model, d_hidden]
