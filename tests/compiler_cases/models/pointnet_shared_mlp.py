"""PointNet classifier: input T-Net predicts a 3x3 transform (plus identity), bmm with the points,
shared per-point MLP as Conv1d + BatchNorm, global max over points, FC head."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class STN3d(nn.Module):
    def __init__(self, k=3):
        super().__init__()
        self.k = k
        self.conv1 = nn.Conv1d(k, 16, 1)
        self.conv2 = nn.Conv1d(16, 32, 1)
        self.fc1 = nn.Linear(32, 16)
        self.fc2 = nn.Linear(16, k * k)
        self.bn1 = nn.BatchNorm1d(16)
        self.bn2 = nn.BatchNorm1d(32)
        self.bn3 = nn.BatchNorm1d(16)

    def forward(self, x):
        batchsize = x.size()[0]
        x = F.relu(self.bn1(self.conv1(x)))
        x = F.relu(self.bn2(self.conv2(x)))
        x = torch.max(x, 2, keepdim=True)[0]
        x = x.view(-1, 32)
        x = F.relu(self.bn3(self.fc1(x)))
        x = self.fc2(x)
        iden = torch.eye(self.k, dtype=x.dtype, device=x.device).view(1, self.k * self.k).repeat(batchsize, 1)
        x = x + iden
        x = x.view(-1, self.k, self.k)
        return x


class Model(nn.Module):
    def __init__(self, num_classes=4):
        super().__init__()
        self.stn = STN3d(3)
        self.conv1 = nn.Conv1d(3, 16, 1)
        self.conv2 = nn.Conv1d(16, 32, 1)
        self.bn1 = nn.BatchNorm1d(16)
        self.bn2 = nn.BatchNorm1d(32)
        self.fc1 = nn.Linear(32, 16)
        self.bn3 = nn.BatchNorm1d(16)
        self.dropout = nn.Dropout(p=0.3)
        self.fc2 = nn.Linear(16, num_classes)
        self.eval()  # an inference model: compiled for eval mode

    def forward(self, x):
        n_pts = x.size()[2]
        trans = self.stn(x)
        x = x.transpose(2, 1)
        x = torch.bmm(x, trans)
        x = x.transpose(2, 1)
        x = F.relu(self.bn1(self.conv1(x)))
        x = self.bn2(self.conv2(x))
        x = torch.max(x, 2, keepdim=True)[0]
        x = x.view(-1, 32)
        x = F.relu(self.bn3(self.fc1(x)))
        x = self.fc2(self.dropout(x))
        return F.log_softmax(x, dim=1), trans


def get_inputs():
    return [torch.randn(2, 3, 32)]


def get_init_inputs():
    return [4]
