"""Faster R-CNN ROI box head (torchvision TwoMLPHead): 256x7x7 pooled ROI features -> fc 1024 -> fc
1024 -> 91x4 box deltas, smooth L1 on each ROI's class; 4 images x 512 ROIs."""
import torch
import torch.nn as nn
import torch.nn.functional as F

ROIS, CHANNELS, POOL, REPR, CLASSES = 4 * 512, 256, 7, 1024, 91


class Model(nn.Module):
    def __init__(self, channels, pool, representation, classes):
        super().__init__()
        self.fc6 = nn.Linear(channels * pool * pool, representation)
        self.fc7 = nn.Linear(representation, representation)
        self.bbox_pred = nn.Linear(representation, classes * 4)

    def forward(self, features, labels, targets):
        x = F.relu(self.fc6(features.flatten(1)))
        x = F.relu(self.fc7(x))
        deltas = self.bbox_pred(x).view(x.size(0), -1, 4)
        deltas = deltas.gather(1, labels.view(-1, 1, 1).expand(-1, 1, 4)).squeeze(1)
        return F.smooth_l1_loss(deltas, targets, beta=1.0 / 9, reduction="sum") / labels.numel()


def get_inputs():
    return [
        torch.randn(ROIS, CHANNELS, POOL, POOL),
        torch.randint(0, CLASSES, (ROIS,)),
        torch.randn(ROIS, 4),
    ]


def get_init_inputs():
    return [CHANNELS, POOL, REPR, CLASSES]
