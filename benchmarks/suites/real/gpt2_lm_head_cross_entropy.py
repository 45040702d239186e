"""GPT-2 small LM head with loss: final LayerNorm(768), bias-free vocab projection 768 -> 50257,
token cross-entropy; 8 x 1024 tokens."""
import torch
import torch.nn as nn
import torch.nn.functional as F

BATCH, SEQ, DIM, VOCAB = 8, 1024, 768, 50257


class Model(nn.Module):
    def __init__(self, dim, vocab):
        super().__init__()
        self.ln_f = nn.LayerNorm(dim)
        self.lm_head = nn.Linear(dim, vocab, bias=False)

    def forward(self, hidden, targets):
        logits = self.lm_head(self.ln_f(hidden))
        return F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))


def get_inputs():
    return [torch.randn(BATCH, SEQ, DIM), torch.randint(0, VOCAB, (BATCH, SEQ))]


def get_init_inputs():
    return [DIM, VOCAB]
