"""CLIP contrastive head: linear projections, F.normalize, learned temperature logit_scale.exp(),
image-text similarity matmul, symmetric cross entropy with labels = torch.arange(n)."""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self, image_dim=24, text_dim=20, embed_dim=16, init_temperature=0.07):
        super().__init__()
        self.image_projection = nn.Linear(image_dim, embed_dim, bias=False)
        self.text_projection = nn.Linear(text_dim, embed_dim, bias=False)
        self.logit_scale = nn.Parameter(torch.ones([]) * math.log(1 / init_temperature))
        self.eval()  # an inference model: compiled for eval mode

    def forward(self, image_features, text_features):
        image_embeds = F.normalize(self.image_projection(image_features), dim=-1)
        text_embeds = F.normalize(self.text_projection(text_features), dim=-1)
        logit_scale = self.logit_scale.exp()
        logits_per_image = logit_scale * image_embeds @ text_embeds.t()
        logits_per_text = logits_per_image.t()
        labels = torch.arange(logits_per_image.shape[0], device=logits_per_image.device,
                              dtype=torch.long)
        loss = (F.cross_entropy(logits_per_image, labels)
                + F.cross_entropy(logits_per_text, labels)) / 2
        return loss, logits_per_image


def get_inputs():
    return [torch.randn(8, 24), torch.randn(8, 20)]


def get_init_inputs():
    return [24, 20, 16, 0.07]
