"""Sequence classifier stepping nn.LSTMCell in a Python loop, states from x.new_zeros."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, input_size=8, hidden_size=16, num_classes=3):
        super().__init__()
        self.hidden_size = hidden_size
        self.cell = nn.LSTMCell(input_size, hidden_size)
        self.fc = nn.Linear(hidden_size, num_classes)
        self.eval()  # an inference model: compiled for eval mode

    def forward(self, x):
        batch_size, seq_len, _ = x.size()
        h = x.new_zeros(batch_size, self.hidden_size)
        c = x.new_zeros(batch_size, self.hidden_size)
        outputs = []
        for t in range(seq_len):
            h, c = self.cell(x[:, t, :], (h, c))
            outputs.append(h)
        outputs = torch.stack(outputs, dim=1)
        return self.fc(outputs[:, -1]), outputs


def get_inputs():
    return [torch.randn(2, 6, 8)]


def get_init_inputs():
    return [8, 16, 3]
