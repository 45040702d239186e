"""BERT-base eager self-attention probabilities: matmul(Q, K^T) / sqrt(64), softmax over keys; batch
64, 12 heads, 512 tokens."""
import math
import torch
import torch.nn as nn

BATCH, HEADS, SEQ, HEAD_DIM = 64, 12, 512, 64


class Model(nn.Module):
    def __init__(self, head_dim):
        super().__init__()
        self.scale = 1.0 / math.sqrt(head_dim)

    def forward(self, q, k):
        scores = torch.matmul(q, k.transpose(-1, -2)) * self.scale
        return torch.softmax(scores, dim=-1)


def get_inputs():
    return [torch.randn(BATCH, HEADS, SEQ, HEAD_DIM), torch.randn(BATCH, HEADS, SEQ, HEAD_DIM)]


def get_init_inputs():
    return [HEAD_DIM]
