"""DeepLabV3 ASPP module on ResNet-101 output-stride-16 features: 1x1 conv, three dilated 3x3 convs
(rates 6/12/18), image-pooling branch, each 2048->256 with BN+ReLU, concat, 1x1 projection 1280->256
+ BN + ReLU; 513x513 crops (33x33 features), batch 16."""
import torch
import torch.nn as nn
import torch.nn.functional as F

BATCH, IN_CHANNELS, OUT_CHANNELS, SIZE = 16, 2048, 256, 33
RATE1, RATE2, RATE3 = 6, 12, 18


def conv_bn_relu(in_channels, out_channels, kernel_size, dilation=1):
    padding = 0 if kernel_size == 1 else dilation
    return nn.Sequential(
        nn.Conv2d(
            in_channels, out_channels, kernel_size, padding=padding, dilation=dilation, bias=False
        ),
        nn.BatchNorm2d(out_channels),
        nn.ReLU(),
    )


class Model(nn.Module):
    def __init__(self, in_channels, out_channels, rate1, rate2, rate3):
        super().__init__()
        self.branch1x1 = conv_bn_relu(in_channels, out_channels, 1)
        self.atrous1 = conv_bn_relu(in_channels, out_channels, 3, rate1)
        self.atrous2 = conv_bn_relu(in_channels, out_channels, 3, rate2)
        self.atrous3 = conv_bn_relu(in_channels, out_channels, 3, rate3)
        self.pool_branch = nn.Sequential(
            nn.AdaptiveAvgPool2d(1), conv_bn_relu(in_channels, out_channels, 1)
        )
        self.project = conv_bn_relu(5 * out_channels, out_channels, 1)

    def forward(self, x):
        size = x.shape[-2:]
        pooled = F.interpolate(self.pool_branch(x), size=size, mode="bilinear", align_corners=False)
        branches = [self.branch1x1(x), self.atrous1(x), self.atrous2(x), self.atrous3(x), pooled]
        return self.project(torch.cat(branches, dim=1))


def get_inputs():
    return [torch.randn(BATCH, IN_CHANNELS, SIZE, SIZE)]


def get_init_inputs():
    return [IN_CHANNELS, OUT_CHANNELS, RATE1, RATE2, RATE3]
