"""BERT-base output block in bfloat16: Linear 3072 -> 768, dropout (eval), residual add,
LayerNorm; 32 x 512 tokens."""
import torch
import torch.nn as nn

TOKENS, DIM, HIDDEN = 32 * 512, 768, 3072
DTYPE = torch.bfloat16


class Model(nn.Module):
    def __init__(self, dim, hidden):
        super().__init__()
        self.dense = nn.Linear(hidden, dim)
        self.dropout = nn.Dropout(0.1)
        self.norm = nn.LayerNorm(dim, eps=1e-12)
        self.to(DTYPE)
        self.eval()

    def forward(self, hidden_states, input_tensor):
        return self.norm(self.dropout(self.dense(hidden_states)) + input_tensor)


def get_inputs():
    return [torch.randn(TOKENS, HIDDEN, dtype=DTYPE), torch.randn(TOKENS, DIM, dtype=DTYPE)]


def get_init_inputs():
    return [DIM, HIDDEN]
