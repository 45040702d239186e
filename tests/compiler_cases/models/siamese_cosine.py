"""Siamese network: one shared MLP encoder for both inputs, L2-normalised embeddings
(F.normalize), cosine similarity between the pair (F.cosine_similarity)."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self, in_features=20, hidden=32, embed_dim=16):
        super().__init__()
        self.encoder = nn.Sequential(
            nn.Linear(in_features, hidden),
            nn.ReLU(inplace=True),
            nn.Dropout(0.1),
            nn.Linear(hidden, embed_dim),
        )
        self.eval()  # an inference model: compiled for eval mode

    def forward_once(self, x):
        return F.normalize(self.encoder(x), p=2, dim=1)

    def forward(self, x1, x2):
        e1 = self.forward_once(x1)
        e2 = self.forward_once(x2)
        similarity = F.cosine_similarity(e1, e2, dim=1, eps=1e-8)
        return similarity, e1, e2


def get_inputs():
    return [torch.randn(6, 20), torch.randn(6, 20)]


def get_init_inputs():
    return [20, 32, 16]
