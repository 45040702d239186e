"""Focal loss (Lin et al.) over a linear classifier, with per-class alpha and a reduction chosen
by a config string."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class FocalLoss(nn.Module):
    def __init__(self, alpha=None, gamma=2.0, reduction="mean"):
        super().__init__()
        self.gamma = gamma
        self.reduction = reduction
        if alpha is not None:
            self.register_buffer("alpha", torch.as_tensor(alpha, dtype=torch.float32))
        else:
            self.alpha = None

    def forward(self, logits, target):
        log_prob = F.log_softmax(logits, dim=-1)
        logpt = log_prob.gather(1, target.unsqueeze(1)).squeeze(1)
        pt = logpt.exp()
        loss = -((1 - pt).pow(self.gamma)) * logpt
        if self.alpha is not None:
            loss = loss * self.alpha.gather(0, target)
        if self.reduction == "mean":
            return loss.mean()
        elif self.reduction == "sum":
            return loss.sum()
        return loss


class Model(nn.Module):
    def __init__(self, in_features=16, num_classes=5, gamma=2.0, reduction="mean"):
        super().__init__()
        self.classifier = nn.Linear(in_features, num_classes)
        alpha = [0.25] + [0.75] * (num_classes - 1)
        self.criterion = FocalLoss(alpha=alpha, gamma=gamma, reduction=reduction)
        self.eval()  # an inference model: compiled for eval mode

    def forward(self, x, target):
        return self.criterion(self.classifier(x), target)


def get_inputs():
    return [torch.randn(20, 16), torch.randint(0, 5, (20,))]


def get_init_inputs():
    return [16, 5, 2.0, "mean"]
