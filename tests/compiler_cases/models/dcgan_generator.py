"""DCGAN generator (PyTorch example layout): ConvTranspose2d + BatchNorm2d + ReLU stages, Tanh
output, weights_init applied through self.apply."""
import torch
import torch.nn as nn


def weights_init(m):
    classname = m.__class__.__name__
    if classname.find("Conv") != -1:
        nn.init.normal_(m.weight.data, 0.0, 0.02)
    elif classname.find("BatchNorm") != -1:
        nn.init.normal_(m.weight.data, 1.0, 0.02)
        nn.init.constant_(m.bias.data, 0)


class Model(nn.Module):
    def __init__(self, nz=16, ngf=8, nc=3):
        super().__init__()
        self.main = nn.Sequential(
            nn.ConvTranspose2d(nz, ngf * 4, 4, 1, 0, bias=False),
            nn.BatchNorm2d(ngf * 4),
            nn.ReLU(True),
            nn.ConvTranspose2d(ngf * 4, ngf * 2, 4, 2, 1, bias=False),
            nn.BatchNorm2d(ngf * 2),
            nn.ReLU(True),
            nn.ConvTranspose2d(ngf * 2, ngf, 4, 2, 1, bias=False),
            nn.BatchNorm2d(ngf),
            nn.ReLU(True),
            nn.ConvTranspose2d(ngf, nc, 4, 2, 1, bias=False),
            nn.Tanh(),
        )
        self.apply(weights_init)
        self.eval()  # an inference model: compiled for eval mode

    def forward(self, input):
        return self.main(input)


def get_inputs():
    return [torch.randn(2, 16, 1, 1)]


def get_init_inputs():
    return [16, 8, 3]
