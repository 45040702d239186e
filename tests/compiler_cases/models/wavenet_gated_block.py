"""WaveNet: one-hot mu-law input, causal conv, a stack of dilated causal convs with tanh*sigmoid
gating, residual and skip 1x1 convs, ReLU-1x1-ReLU-1x1 output to class logits."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class CausalConv1d(nn.Conv1d):
    def __init__(self, in_channels, out_channels, kernel_size, dilation=1, **kwargs):
        super().__init__(in_channels, out_channels, kernel_size, padding=0, dilation=dilation,
                         **kwargs)
        self.left_padding = dilation * (kernel_size - 1)

    def forward(self, x):
        x = F.pad(x, (self.left_padding, 0))
        return super().forward(x)


class ResidualBlock(nn.Module):
    def __init__(self, residual_channels, skip_channels, dilation, kernel_size=2):
        super().__init__()
        self.dilated = CausalConv1d(residual_channels, 2 * residual_channels, kernel_size,
                                    dilation=dilation)
        self.res = nn.Conv1d(residual_channels, residual_channels, 1)
        self.skip = nn.Conv1d(residual_channels, skip_channels, 1)

    def forward(self, x):
        h = self.dilated(x)
        filt, gate = torch.chunk(h, 2, dim=1)
        z = torch.tanh(filt) * torch.sigmoid(gate)
        return x + self.res(z), self.skip(z)


class Model(nn.Module):
    def __init__(self, quantization_channels=16, residual_channels=8, skip_channels=16,
                 dilations=(1, 2, 4, 8)):
        super().__init__()
        self.quantization_channels = quantization_channels
        self.causal = CausalConv1d(quantization_channels, residual_channels, 2)
        self.blocks = nn.ModuleList(
            [ResidualBlock(residual_channels, skip_channels, d) for d in dilations])
        self.out1 = nn.Conv1d(skip_channels, skip_channels, 1)
        self.out2 = nn.Conv1d(skip_channels, quantization_channels, 1)
        self.eval()  # an inference model: compiled for eval mode

    def forward(self, audio):
        x = F.one_hot(audio, num_classes=self.quantization_channels).float()
        x = x.transpose(1, 2)
        x = self.causal(x)
        skips = 0
        for block in self.blocks:
            x, skip = block(x)
            skips = skips + skip
        out = self.out2(F.relu(self.out1(F.relu(skips))))
        return out


def get_inputs():
    return [torch.randint(0, 16, (2, 20))]


def get_init_inputs():
    return [16, 8, 16, (1, 2, 4, 8)]
