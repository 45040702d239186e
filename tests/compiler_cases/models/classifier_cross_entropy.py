"""MLP classifier trained with class-weighted cross entropy; the weight is a buffer and the labels
are an integer input."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self, in_features=24, hidden=32, num_classes=6, label_smoothing=0.0):
        super().__init__()
        self.net = nn.Sequential(
            nn.Linear(in_features, hidden),
            nn.BatchNorm1d(hidden),
            nn.ReLU(),
            nn.Dropout(0.2),
            nn.Linear(hidden, num_classes),
        )
        self.label_smoothing = label_smoothing
        self.register_buffer("class_weight", torch.linspace(0.5, 2.0, num_classes))
        self.eval()  # an inference model: compiled for eval mode

    def forward(self, x, labels):
        logits = self.net(x)
        loss = F.cross_entropy(logits, labels, weight=self.class_weight,
                               label_smoothing=self.label_smoothing)
        return loss


def get_inputs():
    return [torch.randn(16, 24), torch.randint(0, 6, (16,))]


def get_init_inputs():
    return [24, 32, 6, 0.0]
