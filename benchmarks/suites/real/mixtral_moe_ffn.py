"""Mixtral-8x7B sparse MoE FFN (layers.0.block_sparse_moe): router 4096 -> 8, softmax, top-2, 8
SwiGLU experts 4096 -> 14336, dense masked loop; 1 x 512 tokens."""
import torch
import torch.nn as nn
import torch.nn.functional as F

BATCH, SEQ, DIM, HIDDEN, EXPERTS, TOP_K = 1, 512, 4096, 14336, 8, 2


class Expert(nn.Module):
    def __init__(self, dim, hidden):
        super().__init__()
        self.w1 = nn.Linear(dim, hidden, bias=False)
        self.w2 = nn.Linear(hidden, dim, bias=False)
        self.w3 = nn.Linear(dim, hidden, bias=False)

    def forward(self, x):
        return self.w2(F.silu(self.w1(x)) * self.w3(x))


class Model(nn.Module):
    def __init__(self, dim, hidden, experts, top_k):
        super().__init__()
        self.top_k = top_k
        self.gate = nn.Linear(dim, experts, bias=False)
        self.experts = nn.ModuleList(Expert(dim, hidden) for _ in range(experts))

    def forward(self, x):
        b, s, d = x.shape
        x = x.reshape(b * s, d)
        routing = F.softmax(self.gate(x), dim=-1)
        weights, selected = torch.topk(routing, self.top_k, dim=-1)
        weights = weights / weights.sum(dim=-1, keepdim=True)
        out = torch.zeros_like(x)
        for e, expert in enumerate(self.experts):
            w = (weights * (selected == e).to(x.dtype)).sum(dim=-1, keepdim=True)
            out = out + w * expert(x)
        return out.view(b, s, d)


def get_inputs():
    return [torch.randn(BATCH, SEQ, DIM)]


def get_init_inputs():
    return [DIM, HIDDEN, EXPERTS, TOP_K]
