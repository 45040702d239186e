"""2-layer LSTM language model core (Zaremba et al. 2014 "large", 1500 hidden) over 70-step BPTT
windows, batch 64, carrying (h, c)."""
import torch
import torch.nn as nn

SEQ, BATCH, HIDDEN = 70, 64, 1500
LAYERS = 2


class Model(nn.Module):
    def __init__(self, hidden, layers):
        super().__init__()
        self.lstm = nn.LSTM(hidden, hidden, num_layers=layers)

    def forward(self, x, h0, c0):
        out, (h, c) = self.lstm(x, (h0, c0))
        return out, h, c


def get_inputs():
    return [
        torch.randn(SEQ, BATCH, HIDDEN),
        torch.randn(LAYERS, BATCH, HIDDEN),
        torch.randn(LAYERS, BATCH, HIDDEN),
    ]


def get_init_inputs():
    return [HIDDEN, LAYERS]
