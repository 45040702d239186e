"""TCN residual block (Bai et al. 2018 TemporalBlock): two weight-normed dilated causal Conv1d
512->512 (kernel 3, dilation 8, left padding via pad+chomp) each + ReLU, residual add, ReLU;
4096-step sequences, batch 16."""
import torch
import torch.nn as nn

BATCH, CHANNELS, LENGTH = 16, 512, 4096
KERNEL, DILATION = 3, 8


class Model(nn.Module):
    def __init__(self, channels, kernel, dilation):
        super().__init__()
        self.chomp = (kernel - 1) * dilation
        wn = nn.utils.parametrizations.weight_norm
        self.conv1 = wn(
            nn.Conv1d(channels, channels, kernel, padding=self.chomp, dilation=dilation)
        )
        self.conv2 = wn(
            nn.Conv1d(channels, channels, kernel, padding=self.chomp, dilation=dilation)
        )

    def forward(self, x):
        out = torch.relu(self.conv1(x)[:, :, : -self.chomp].contiguous())
        out = torch.relu(self.conv2(out)[:, :, : -self.chomp].contiguous())
        return torch.relu(out + x)


def get_inputs():
    return [torch.randn(BATCH, CHANNELS, LENGTH)]


def get_init_inputs():
    return [CHANNELS, KERNEL, DILATION]
