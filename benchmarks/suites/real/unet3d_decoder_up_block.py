"""3D U-Net decoder step for medical volumes (nnU-Net 3d_fullres style): ConvTranspose3d 2x2x2
stride 2 128->64 (32^3 -> 64^3), concat with the 64-channel skip, two 3x3x3 Conv3d + InstanceNorm3d
+ LeakyReLU(0.01) 128->64->64; 128^3 patches, batch 2."""
import torch
import torch.nn as nn
import torch.nn.functional as F

BATCH, CHANNELS, SIZE = 2, 128, 32


class Model(nn.Module):
    def __init__(self, channels):
        super().__init__()
        out_channels = channels // 2
        self.transp_conv = nn.ConvTranspose3d(channels, out_channels, kernel_size=2, stride=2)
        self.conv1 = nn.Conv3d(channels, out_channels, kernel_size=3, padding=1)
        self.norm1 = nn.InstanceNorm3d(out_channels, eps=1e-5, affine=True)
        self.conv2 = nn.Conv3d(out_channels, out_channels, kernel_size=3, padding=1)
        self.norm2 = nn.InstanceNorm3d(out_channels, eps=1e-5, affine=True)

    def forward(self, x, skip):
        x = torch.cat([self.transp_conv(x), skip], dim=1)
        x = F.leaky_relu(self.norm1(self.conv1(x)), 0.01)
        return F.leaky_relu(self.norm2(self.conv2(x)), 0.01)


def get_inputs():
    return [
        torch.randn(BATCH, CHANNELS, SIZE, SIZE, SIZE),
        torch.randn(BATCH, CHANNELS // 2, 2 * SIZE, 2 * SIZE, 2 * SIZE),
    ]


def get_init_inputs():
    return [CHANNELS]
