"""BERT-large intermediate (BertIntermediate): linear 1024 -> 4096 with bias, exact (erf) GELU; 32 x
512 tokens."""
import torch
import torch.nn as nn
import torch.nn.functional as F

BATCH, SEQ, HIDDEN, INTERMEDIATE = 32, 512, 1024, 4096


class Model(nn.Module):
    def __init__(self, hidden, intermediate):
        super().__init__()
        self.dense = nn.Linear(hidden, intermediate)

    def forward(self, hidden_states):
        return F.gelu(self.dense(hidden_states))


def get_inputs():
    return [torch.randn(BATCH, SEQ, HIDDEN)]


def get_init_inputs():
    return [HIDDEN, INTERMEDIATE]
