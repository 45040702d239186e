"""CLIP contrastive loss (ViT-B/32 as trained: batch 32768, 512-d joint embedding): L2-normalise,
learned logit scale, img @ txt.T, symmetric cross-entropy."""
import math
import torch
import torch.nn as nn
import torch.nn.functional as F

BATCH, EMBED = 32768, 512


class Model(nn.Module):
    def __init__(self, init_temperature):
        super().__init__()
        self.logit_scale = nn.Parameter(torch.ones([]) * math.log(1.0 / init_temperature))

    def forward(self, image_embeds, text_embeds):
        image_embeds = F.normalize(image_embeds, dim=-1)
        text_embeds = F.normalize(text_embeds, dim=-1)
        logits = self.logit_scale.exp() * image_embeds @ text_embeds.t()
        labels = torch.arange(logits.size(0), device=logits.device)
        return (F.cross_entropy(logits, labels) + F.cross_entropy(logits.t(), labels)) / 2


def get_inputs():
    return [torch.randn(BATCH, EMBED), torch.randn(BATCH, EMBED)]


def get_init_inputs():
    return [0.07]
