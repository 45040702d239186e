"""ResNeXt bottleneck (torchvision layout): grouped 3x3 conv, width from base_width and groups,
class attribute expansion = 4 read in __init__ and forward, projection shortcut."""
import torch
import torch.nn as nn


def conv3x3(in_planes, out_planes, stride=1, groups=1, dilation=1):
    return nn.Conv2d(in_planes, out_planes, kernel_size=3, stride=stride, padding=dilation,
                     groups=groups, bias=False, dilation=dilation)


def conv1x1(in_planes, out_planes, stride=1):
    return nn.Conv2d(in_planes, out_planes, kernel_size=1, stride=stride, bias=False)


class Model(nn.Module):
    expansion = 4

    def __init__(self, inplanes=16, planes=8, stride=1, groups=4, base_width=16):
        super().__init__()
        width = int(planes * (base_width / 64.0)) * groups
        self.planes = planes
        self.conv1 = conv1x1(inplanes, width)
        self.bn1 = nn.BatchNorm2d(width)
        self.conv2 = conv3x3(width, width, stride, groups)
        self.bn2 = nn.BatchNorm2d(width)
        self.conv3 = conv1x1(width, planes * self.expansion)
        self.bn3 = nn.BatchNorm2d(planes * self.expansion)
        self.relu = nn.ReLU(inplace=True)
        self.downsample = None
        if stride != 1 or inplanes != planes * self.expansion:
            self.downsample = nn.Sequential(
                conv1x1(inplanes, planes * self.expansion, stride),
                nn.BatchNorm2d(planes * self.expansion),
            )
        self.stride = stride
        self.eval()  # an inference model: compiled for eval mode

    def forward(self, x):
        identity = x

        out = self.conv1(x)
        out = self.bn1(out)
        out = self.relu(out)

        out = self.conv2(out)
        out = self.bn2(out)
        out = self.relu(out)

        out = self.conv3(out)
        out = self.bn3(out)

        if self.stride != 1 or x.size(1) != self.planes * self.expansion:
            identity = self.downsample(x)

        out += identity
        out = self.relu(out)
        return out


def get_inputs():
    return [torch.randn(1, 16, 6, 6)]


def get_init_inputs():
    return [16, 8, 1, 4, 16]
