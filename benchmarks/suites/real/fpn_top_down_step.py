"""FPN top-down step (P4 -> P3) of a ResNet-50 FPN detector: 1x1 lateral conv 512->256 on C3
(100x152), nearest upsample of the 256-channel 50x76 map, add, 3x3 smoothing conv 256->256; Mask
R-CNN 800x1216 images, batch 8."""
import torch
import torch.nn as nn
import torch.nn.functional as F

BATCH, IN_CHANNELS, FPN_CHANNELS, HEIGHT, WIDTH = 8, 512, 256, 100, 152


class Model(nn.Module):
    def __init__(self, in_channels, fpn_channels):
        super().__init__()
        self.lateral = nn.Conv2d(in_channels, fpn_channels, kernel_size=1)
        self.smooth = nn.Conv2d(fpn_channels, fpn_channels, kernel_size=3, padding=1)

    def forward(self, c3, p4_inner):
        lateral = self.lateral(c3)
        top_down = F.interpolate(p4_inner, size=lateral.shape[-2:], mode="nearest")
        inner = lateral + top_down
        return self.smooth(inner)


def get_inputs():
    return [
        torch.randn(BATCH, IN_CHANNELS, HEIGHT, WIDTH),
        torch.randn(BATCH, FPN_CHANNELS, HEIGHT // 2, WIDTH // 2),
    ]


def get_init_inputs():
    return [IN_CHANNELS, FPN_CHANNELS]
