"""Top-2 mixture-of-experts FFN (dense dispatch): router logits, topk, softmax over the two
selected logits, loop over experts weighting each expert's output by a dense routing mask."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class Expert(nn.Module):
    def __init__(self, dim, hidden):
        super().__init__()
        self.w1 = nn.Linear(dim, hidden, bias=False)
        self.w2 = nn.Linear(hidden, dim, bias=False)
        self.w3 = nn.Linear(dim, hidden, bias=False)

    def forward(self, x):
        return self.w2(F.silu(self.w1(x)) * self.w3(x))


class Model(nn.Module):
    def __init__(self, dim=16, hidden=32, num_experts=4, top_k=2):
        super().__init__()
        self.num_experts = num_experts
        self.top_k = top_k
        self.gate = nn.Linear(dim, num_experts, bias=False)
        self.experts = nn.ModuleList([Expert(dim, hidden) for _ in range(num_experts)])
        self.eval()  # an inference model: compiled for eval mode

    def forward(self, hidden_states):
        batch_size, sequence_length, hidden_dim = hidden_states.shape
        x = hidden_states.view(-1, hidden_dim)
        router_logits = self.gate(x)
        routing_weights, selected_experts = torch.topk(router_logits, self.top_k, dim=-1)
        routing_weights = F.softmax(routing_weights, dim=-1, dtype=torch.float).to(x.dtype)
        final = torch.zeros_like(x)
        for expert_idx, expert in enumerate(self.experts):
            mask = (selected_experts == expert_idx).to(x.dtype)
            weight = (routing_weights * mask).sum(dim=-1, keepdim=True)
            final = final + weight * expert(x)
        return final.view(batch_size, sequence_length, hidden_dim), router_logits


def get_inputs():
    return [torch.randn(2, 6, 16)]


def get_init_inputs():
    return [16, 32, 4, 2]
