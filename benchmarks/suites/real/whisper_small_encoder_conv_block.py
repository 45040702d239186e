"""Whisper-small encoder front and first block: Conv1d 80 -> 768 (k3) + GELU, Conv1d 768 -> 768 (k3,
stride 2) + GELU, sinusoidal positions, pre-LN 12-head attention + GELU MLP 3072; 16 x 3000 mel
frames."""
import math
import torch
import torch.nn as nn
import torch.nn.functional as F

BATCH, MELS, FRAMES, DIM, HEADS, HIDDEN = 16, 80, 3000, 768, 12, 3072


def sinusoids(length, channels, max_timescale=10000):
    inc = math.log(max_timescale) / (channels // 2 - 1)
    inv = torch.exp(-inc * torch.arange(channels // 2, dtype=torch.float32))
    t = torch.arange(length, dtype=torch.float32)[:, None] * inv[None, :]
    return torch.cat([torch.sin(t), torch.cos(t)], dim=1)


class Model(nn.Module):
    def __init__(self, mels, frames, dim, heads, hidden):
        super().__init__()
        self.heads = heads
        self.conv1 = nn.Conv1d(mels, dim, kernel_size=3, padding=1)
        self.conv2 = nn.Conv1d(dim, dim, kernel_size=3, stride=2, padding=1)
        self.register_buffer("positional_embedding", sinusoids((frames - 1) // 2 + 1, dim))
        self.attn_ln = nn.LayerNorm(dim)
        self.query = nn.Linear(dim, dim)
        self.key = nn.Linear(dim, dim, bias=False)
        self.value = nn.Linear(dim, dim)
        self.out = nn.Linear(dim, dim)
        self.mlp_ln = nn.LayerNorm(dim)
        self.fc1 = nn.Linear(dim, hidden)
        self.fc2 = nn.Linear(hidden, dim)

    def forward(self, mel):
        x = F.gelu(self.conv1(mel))
        x = F.gelu(self.conv2(x)).permute(0, 2, 1)
        x = x + self.positional_embedding
        b, s, d = x.shape
        h = self.attn_ln(x)
        q = self.query(h).view(b, s, self.heads, d // self.heads).transpose(1, 2)
        k = self.key(h).view(b, s, self.heads, d // self.heads).transpose(1, 2)
        v = self.value(h).view(b, s, self.heads, d // self.heads).transpose(1, 2)
        a = F.scaled_dot_product_attention(q, k, v, dropout_p=0.0)
        x = x + self.out(a.transpose(1, 2).reshape(b, s, d))
        return x + self.fc2(F.gelu(self.fc1(self.mlp_ln(x))))


def get_inputs():
    return [torch.randn(BATCH, MELS, FRAMES)]


def get_init_inputs():
    return [MELS, FRAMES, DIM, HEADS, HIDDEN]
