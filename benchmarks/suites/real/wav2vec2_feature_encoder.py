"""wav2vec 2.0 base conv feature encoder: Conv1d 1->512 k10 s5 (no bias) + GroupNorm(512) + GELU on
raw 16 kHz audio, then six Conv1d 512->512 (k3 s2 x4, k2 s2 x2) + GELU; 10 s clips (160000 samples
-> 499 frames), batch 8."""
import torch
import torch.nn as nn
import torch.nn.functional as F

BATCH, SAMPLES, CHANNELS = 8, 160000, 512


class Model(nn.Module):
    def __init__(self, channels):
        super().__init__()
        kernels = [10, 3, 3, 3, 3, 2, 2]
        strides = [5, 2, 2, 2, 2, 2, 2]
        self.convs = nn.ModuleList()
        in_channels = 1
        for kernel, stride in zip(kernels, strides):
            self.convs.append(nn.Conv1d(in_channels, channels, kernel, stride=stride, bias=False))
            in_channels = channels
        self.norm = nn.GroupNorm(channels, channels, affine=True)

    def forward(self, waveform):
        x = waveform[:, None, :]
        for i, conv in enumerate(self.convs):
            x = conv(x)
            if i == 0:
                x = self.norm(x)
            x = F.gelu(x)
        return x


def get_inputs():
    return [torch.randn(BATCH, SAMPLES)]


def get_init_inputs():
    return [CHANNELS]
