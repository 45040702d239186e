"""C3D-style video block (conv1a, pool1, conv2a with BatchNorm): Conv3d 3x3x3 3->64 + BN3d + ReLU on
16 frames of 112x112, MaxPool3d (1,2,2), Conv3d 3x3x3 64->128 + BN3d + ReLU at 16x56x56;
action-recognition clips, batch 16."""
import torch
import torch.nn as nn

BATCH, CHANNELS, FRAMES, SIZE = 16, 3, 16, 112
FEATURES = 64


class Model(nn.Module):
    def __init__(self, channels, features):
        super().__init__()
        self.conv1 = nn.Conv3d(channels, features, kernel_size=3, padding=1)
        self.bn1 = nn.BatchNorm3d(features)
        self.pool1 = nn.MaxPool3d(kernel_size=(1, 2, 2), stride=(1, 2, 2))
        self.conv2 = nn.Conv3d(features, 2 * features, kernel_size=3, padding=1)
        self.bn2 = nn.BatchNorm3d(2 * features)

    def forward(self, x):
        x = torch.relu(self.bn1(self.conv1(x)))
        x = self.pool1(x)
        return torch.relu(self.bn2(self.conv2(x)))


def get_inputs():
    return [torch.randn(BATCH, CHANNELS, FRAMES, SIZE, SIZE)]


def get_init_inputs():
    return [CHANNELS, FEATURES]
