"""GRU encoder of the RNN encoder-decoder (RNNencdec baseline of Bahdanau et al. 2015: 620-d
embeddings, 1000 gated hidden units), 128 sentences x 50 tokens."""
import torch
import torch.nn as nn

BATCH, SEQ, EMBED, HIDDEN = 128, 50, 620, 1000


class Model(nn.Module):
    def __init__(self, embed, hidden):
        super().__init__()
        self.gru = nn.GRU(embed, hidden, batch_first=True)

    def forward(self, x):
        out, h = self.gru(x)
        return out, h


def get_inputs():
    return [torch.randn(BATCH, SEQ, EMBED)]


def get_init_inputs():
    return [EMBED, HIDDEN]
