"""DLRM top MLP (MLPerf Criteo config 479-1024-1024-512-256-1): addmm + ReLU layers, sigmoid click
probability; batch 32768."""
import torch
import torch.nn as nn

BATCH, INTERACTION = 32768, 479
H1, H2, H3, H4 = 1024, 1024, 512, 256


class Model(nn.Module):
    def __init__(self, interaction, h1, h2, h3, h4):
        super().__init__()
        widths = [interaction, h1, h2, h3, h4]
        self.layers = nn.ModuleList(nn.Linear(a, b) for a, b in zip(widths[:-1], widths[1:]))
        self.out = nn.Linear(h4, 1)

    def forward(self, x):
        for layer in self.layers:
            x = torch.relu(torch.addmm(layer.bias, x, layer.weight.t()))
        return torch.sigmoid(torch.addmm(self.out.bias, x, self.out.weight.t()))


def get_inputs():
    return [torch.randn(BATCH, INTERACTION)]


def get_init_inputs():
    return [INTERACTION, H1, H2, H3, H4]
