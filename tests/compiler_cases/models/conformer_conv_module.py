"""Conformer convolution module: LayerNorm, pointwise Conv1d to 2x channels, GLU over channels,
depthwise Conv1d, BatchNorm1d, SiLU, pointwise Conv1d, dropout, residual."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, in_channels=16, kernel_size=7, expansion_factor=2, dropout_p=0.1):
        super().__init__()
        assert (kernel_size - 1) % 2 == 0, "kernel_size should be a odd number for 'SAME' padding"
        self.layer_norm = nn.LayerNorm(in_channels)
        self.pointwise_conv1 = nn.Conv1d(in_channels, in_channels * expansion_factor, 1)
        self.glu = nn.GLU(dim=1)
        self.depthwise_conv = nn.Conv1d(in_channels, in_channels, kernel_size,
                                        padding=(kernel_size - 1) // 2, groups=in_channels,
                                        bias=False)
        self.batch_norm = nn.BatchNorm1d(in_channels)
        self.activation = nn.SiLU()
        self.pointwise_conv2 = nn.Conv1d(in_channels, in_channels, 1)
        self.dropout = nn.Dropout(p=dropout_p)
        self.eval()  # an inference model: compiled for eval mode

    def forward(self, inputs):
        x = self.layer_norm(inputs).transpose(1, 2)
        x = self.pointwise_conv1(x)
        x = self.glu(x)
        x = self.depthwise_conv(x)
        x = self.batch_norm(x)
        x = self.activation(x)
        x = self.pointwise_conv2(x)
        x = self.dropout(x)
        return inputs + x.transpose(1, 2)


def get_inputs():
    return [torch.randn(2, 12, 16)]


def get_init_inputs():
    return [16, 7, 2, 0.1]
