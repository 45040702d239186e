"""Bidirectional 2-layer LSTM speech encoder (ESPnet/LAS-style, 512 units per direction) on 80-d
log-mel frames, batch 32 x 1000 frames (10 s)."""
import torch
import torch.nn as nn

BATCH, FRAMES, FEATURES, HIDDEN = 32, 1000, 80, 512
LAYERS = 2


class Model(nn.Module):
    def __init__(self, features, hidden, layers):
        super().__init__()
        self.lstm = nn.LSTM(
            features, hidden, num_layers=layers, batch_first=True, bidirectional=True
        )

    def forward(self, x):
        out, (h, c) = self.lstm(x)
        return out, h, c


def get_inputs():
    return [torch.randn(BATCH, FRAMES, FEATURES)]


def get_init_inputs():
    return [FEATURES, HIDDEN, LAYERS]
