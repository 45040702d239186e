import torch
import torch.nn as nn


class Model(nn.Module):
    """A linear layer followed by GELU (tanh approximation)."""

    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x):
        return torch.nn.functional.gelu(self.linear(x), approximate="tanh")


def get_inputs():
    return [torch.randn(32, 64)]


def get_init_inputs():
    return [64, 32]
