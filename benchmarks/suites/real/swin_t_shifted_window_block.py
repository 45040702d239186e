"""Swin-T stage-1 shifted-window block (layers.0.blocks.1): 56x56 tokens, 96 channels, 3 heads, 7x7
windows, shift 3, relative position bias, MLP 384; batch 128."""
import torch
import torch.nn as nn
import torch.nn.functional as F

BATCH, RES, DIM, HEADS, WINDOW, SHIFT, HIDDEN = 128, 56, 96, 3, 7, 3, 384


def window_partition(x, ws):
    b, h, w, c = x.shape
    x = x.view(b, h // ws, ws, w // ws, ws, c)
    return x.permute(0, 1, 3, 2, 4, 5).reshape(-1, ws, ws, c)


def window_reverse(windows, ws, h, w):
    b = windows.shape[0] // ((h // ws) * (w // ws))
    x = windows.view(b, h // ws, w // ws, ws, ws, -1)
    return x.permute(0, 1, 3, 2, 4, 5).reshape(b, h, w, -1)


class Model(nn.Module):
    def __init__(self, res, dim, heads, window, shift, hidden):
        super().__init__()
        self.res, self.heads, self.window, self.shift = res, heads, window, shift
        self.scale = (dim // heads) ** -0.5
        self.norm1 = nn.LayerNorm(dim)
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)
        self.norm2 = nn.LayerNorm(dim)
        self.fc1 = nn.Linear(dim, hidden)
        self.fc2 = nn.Linear(hidden, dim)
        self.relative_position_bias_table = nn.Parameter(torch.empty((2 * window - 1) ** 2, heads))
        nn.init.trunc_normal_(self.relative_position_bias_table, std=0.02)
        coords = torch.stack(
            torch.meshgrid(torch.arange(window), torch.arange(window), indexing="ij")
        )
        coords = coords.flatten(1)
        rel = (coords[:, :, None] - coords[:, None, :]).permute(1, 2, 0).contiguous()
        rel[:, :, 0] += window - 1
        rel[:, :, 1] += window - 1
        rel[:, :, 0] *= 2 * window - 1
        self.register_buffer("relative_position_index", rel.sum(-1))
        if shift > 0:
            img_mask = torch.zeros(1, res, res, 1)
            cnt = 0
            for hs in (slice(0, -window), slice(-window, -shift), slice(-shift, None)):
                for wsl in (slice(0, -window), slice(-window, -shift), slice(-shift, None)):
                    img_mask[:, hs, wsl, :] = cnt
                    cnt += 1
            mw = window_partition(img_mask, window).view(-1, window * window)
            attn_mask = mw.unsqueeze(1) - mw.unsqueeze(2)
            attn_mask = (attn_mask.masked_fill(attn_mask != 0, -100.0)
                         .masked_fill(attn_mask == 0, 0.0))
            self.register_buffer("attn_mask", attn_mask)
        else:
            self.attn_mask = None

    def window_attention(self, x):
        bw, n, c = x.shape
        qkv = self.qkv(x).reshape(bw, n, 3, self.heads, c // self.heads).permute(2, 0, 3, 1, 4)
        q, k, v = qkv.unbind(0)
        attn = (q * self.scale) @ k.transpose(-2, -1)
        bias = (self.relative_position_bias_table[self.relative_position_index.view(-1)]
                .view(n, n, -1))
        attn = attn + bias.permute(2, 0, 1).unsqueeze(0)
        if self.attn_mask is not None:
            nw = self.attn_mask.shape[0]
            attn = (attn.view(bw // nw, nw, self.heads, n, n)
                    + self.attn_mask.unsqueeze(1).unsqueeze(0))
            attn = attn.view(-1, self.heads, n, n)
        attn = attn.softmax(dim=-1)
        x = (attn @ v).transpose(1, 2).reshape(bw, n, c)
        return self.proj(x)

    def forward(self, x):
        b, l, c = x.shape
        h = w = self.res
        ws = self.window
        shortcut = x
        x = self.norm1(x).view(b, h, w, c)
        if self.shift > 0:
            x = torch.roll(x, shifts=(-self.shift, -self.shift), dims=(1, 2))
        windows = window_partition(x, ws).view(-1, ws * ws, c)
        windows = self.window_attention(windows).view(-1, ws, ws, c)
        x = window_reverse(windows, ws, h, w)
        if self.shift > 0:
            x = torch.roll(x, shifts=(self.shift, self.shift), dims=(1, 2))
        x = shortcut + x.reshape(b, h * w, c)
        return x + self.fc2(F.gelu(self.fc1(self.norm2(x))))


def get_inputs():
    return [torch.randn(BATCH, RES * RES, DIM)]


def get_init_inputs():
    return [RES, DIM, HEADS, WINDOW, SHIFT, HIDDEN]
