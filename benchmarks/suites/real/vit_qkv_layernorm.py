"""ViT-B/16 pre-norm QKV projection: LayerNorm then 768 -> 2304 on 256 images x 197 tokens."""
import torch
import torch.nn as nn

BATCH, TOKENS, DIM = 256, 197, 768


class Model(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.norm = nn.LayerNorm(dim)
        self.qkv = nn.Linear(dim, 3 * dim)

    def forward(self, x):
        return self.qkv(self.norm(x))


def get_inputs():
    return [torch.randn(BATCH, TOKENS, DIM)]


def get_init_inputs():
    return [DIM]
