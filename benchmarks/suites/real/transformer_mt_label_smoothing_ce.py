"""Label-smoothed cross-entropy (eps 0.1) of a Transformer-base WMT En-De decoder: 4096 target
tokens over the 37000-token shared BPE vocabulary."""
import torch
import torch.nn as nn
import torch.nn.functional as F

TOKENS, VOCAB = 4096, 37000


class Model(nn.Module):
    def __init__(self, smoothing):
        super().__init__()
        self.smoothing = smoothing

    def forward(self, logits, targets):
        return F.cross_entropy(logits, targets, label_smoothing=self.smoothing)


def get_inputs():
    return [torch.randn(TOKENS, VOCAB), torch.randint(0, VOCAB, (TOKENS,))]


def get_init_inputs():
    return [0.1]
