"""Square fp32 matrix product, 4096 x 4096 x 4096."""
import torch
import torch.nn as nn

M, K, N = 4096, 4096, 4096


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a, b):
        return torch.matmul(a, b)


def get_inputs():
    return [torch.randn(M, K), torch.randn(K, N)]


def get_init_inputs():
    return []
