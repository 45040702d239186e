"""ResNet BasicBlock (torchvision layout) with stride 2 and a conv1x1 + BN downsample shortcut."""
import torch
import torch.nn as nn


def conv3x3(in_planes, out_planes, stride=1):
    return nn.Conv2d(in_planes, out_planes, kernel_size=3, stride=stride, padding=1, bias=False)


class BasicBlock(nn.Module):
    expansion = 1

    def __init__(self, inplanes, planes, stride=1, downsample=None):
        super().__init__()
        self.conv1 = conv3x3(inplanes, planes, stride)
        self.bn1 = nn.BatchNorm2d(planes)
        self.relu = nn.ReLU(inplace=True)
        self.conv2 = conv3x3(planes, planes)
        self.bn2 = nn.BatchNorm2d(planes)
        self.downsample = downsample
        self.stride = stride

    def forward(self, x):
        identity = x
        out = self.conv1(x)
        out = self.bn1(out)
        out = self.relu(out)
        out = self.conv2(out)
        out = self.bn2(out)
        if self.downsample is not None:
            identity = self.downsample(x)
        out += identity
        out = self.relu(out)
        return out


class Model(nn.Module):
    def __init__(self, inplanes=8, planes=16, stride=2):
        super().__init__()
        downsample = None
        if stride != 1 or inplanes != planes * BasicBlock.expansion:
            downsample = nn.Sequential(
                nn.Conv2d(inplanes, planes * BasicBlock.expansion, kernel_size=1, stride=stride,
                          bias=False),
                nn.BatchNorm2d(planes * BasicBlock.expansion),
            )
        self.layer = nn.Sequential(
            BasicBlock(inplanes, planes, stride, downsample),
            BasicBlock(planes, planes),
        )
        self.eval()  # an inference model: compiled for eval mode

    def forward(self, x):
        return self.layer(x)


def get_inputs():
    return [torch.randn(2, 8, 8, 8)]


def get_init_inputs():
    return [8, 16, 2]
