"""Programs written the way people write models (nn modules, residuals, attention, gating)."""

from __future__ import annotations

from compiler_cases.harness import HEAD


def _prog(cls: str, inputs: str, init: str = "[]") -> str:
    return (HEAD + cls.strip() + "\n\n\n"
            + f"def get_inputs():\n    return [{inputs}]\n\n\n"
            + f"def get_init_inputs():\n    return {init}\n")


CASES: dict[str, str] = {
    "linear_gelu": _prog('''
class Model(nn.Module):
    def __init__(self, d_in, d_out):
        super().__init__()
        self.fc = nn.Linear(d_in, d_out)

    def forward(self, x):
        return F.gelu(self.fc(x))
''', "torch.randn(5, 19)", "[19, 13]"),
    "residual_layernorm": _prog('''
class Model(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.proj = nn.Linear(d, d)
        self.norm = nn.LayerNorm(d)

    def forward(self, x):
        return self.norm(x + self.proj(x))
''', "torch.randn(2, 5, 24)", "[24]"),
    "attention_scores": _prog('''
class Model(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.q = nn.Linear(d, d)
        self.k = nn.Linear(d, d)
        self.v = nn.Linear(d, d)
        self.scale = d ** -0.5

    def forward(self, x):
        q, k, v = self.q(x), self.k(x), self.v(x)
        att = torch.softmax(q @ k.transpose(-2, -1) * self.scale, dim=-1)
        return att @ v
''', "torch.randn(2, 7, 16)", "[16]"),
    "conv_relu_bias": _prog('''
class Model(nn.Module):
    def __init__(self, cin, cout, k):
        super().__init__()
        self.conv = nn.Conv2d(cin, cout, k, padding=1)
        self.bias = nn.Parameter(torch.randn(cout, 1, 1) * 0.1)

    def forward(self, x):
        return torch.relu(self.conv(x)) + self.bias
''', "torch.randn(2, 3, 9, 8)", "[3, 5, 3]"),
    "rmsnorm": _prog('''
class Model(nn.Module):
    def __init__(self, d, eps=1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(d))

    def forward(self, x):
        rms = torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)
        return x * rms * self.weight
''', "torch.randn(3, 5, 20)", "[20]"),
    "gated_mlp": _prog('''
class Model(nn.Module):
    def __init__(self, d, h):
        super().__init__()
        self.gate_up = nn.Linear(d, 2 * h, bias=False)
        self.down = nn.Linear(h, d, bias=False)

    def forward(self, x):
        gate, up = self.gate_up(x).chunk(2, dim=-1)
        return self.down(F.silu(gate) * up)
''', "torch.randn(6, 16)", "[16, 24]"),
    "groupnorm_swish": _prog('''
class Model(nn.Module):
    def __init__(self, c, g):
        super().__init__()
        self.gn = nn.GroupNorm(g, c)

    def forward(self, x):
        y = self.gn(x)
        return y * torch.sigmoid(y)
''', "torch.randn(2, 6, 5, 4)", "[6, 3]"),
    "pool_batchnorm": _prog('''
class Model(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.pool = nn.MaxPool2d(2)
        self.bn = nn.BatchNorm2d(c)

    def forward(self, x):
        return self.bn(self.pool(x))
''', "torch.randn(3, 4, 8, 9)", "[4]"),
    "cumulative": _prog('''
class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x, mask):
        keep = (mask > 0).float()
        running_mean = torch.cumsum(x * keep, dim=1) / torch.cumsum(keep, dim=1).clamp(min=1.0)
        return torch.cummax(running_mean, dim=1)[0]
''', "torch.randn(4, 23), torch.randn(4, 23)"),
    "mlp_mish_hardswish": _prog('''
class Model(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(d, d), nn.Mish(), nn.Linear(d, d), nn.Hardswish(),
                                 nn.Linear(d, d), nn.GELU(approximate="tanh"))

    def forward(self, x):
        return self.net(x)
''', "torch.randn(4, 12)", "[12]"),
    "conv_transpose_in_tanh": _prog('''
class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.up = nn.ConvTranspose2d(4, 3, 3, stride=2, padding=1, output_padding=1)
        self.norm = nn.InstanceNorm2d(3, affine=True)

    def forward(self, x):
        return torch.tanh(self.norm(self.up(x)))
''', "torch.randn(2, 4, 3, 4)"),
    "conv1d_avgpool_logsoftmax": _prog('''
class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv1d(3, 6, 5, padding=2)
        self.pool = nn.AdaptiveAvgPool1d(1)

    def forward(self, x):
        y = self.pool(F.relu(self.conv(x))).flatten(1)
        return F.log_softmax(y, dim=1)
''', "torch.randn(2, 3, 17)"),
    "conv3d_groupnorm_mean": _prog('''
class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv3d(2, 4, 3)
        self.gn = nn.GroupNorm(2, 4)

    def forward(self, x):
        return self.gn(self.conv(x)).mean(dim=[1, 2, 3, 4])
''', "torch.randn(2, 2, 5, 4, 6)"),
    "multi_output_slices": _prog('''
class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x, y):
        a = x[:, 1:, None] * 2.0 - 1
        b = torch.max(y, dim=-1)
        return a.permute(2, 0, 1).contiguous(), b.values, b.indices
''', "torch.randn(3, 5), torch.randn(3, 6)"),
    "causal_self_attention_sdpa": _prog('''
class Model(nn.Module):
    def __init__(self, dim, heads):
        super().__init__()
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)
        self.heads = heads

    def forward(self, x):
        b, t, c = x.shape
        q, k, v = self.qkv(x).split(c, dim=2)
        q = q.view(b, t, self.heads, c // self.heads).transpose(1, 2)
        k = k.view(b, t, self.heads, c // self.heads).transpose(1, 2)
        v = v.view(b, t, self.heads, c // self.heads).transpose(1, 2)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.proj(y.transpose(1, 2).contiguous().view(b, t, c))
''', "torch.randn(2, 7, 8)", "[8, 2]"),
    "cross_attention_masks_sdpa": _prog('''
class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, q, k, v, keep, bias):
        a = F.scaled_dot_product_attention(q, k, v, attn_mask=keep)
        b = F.scaled_dot_product_attention(q, k, v, attn_mask=bias, scale=0.3)
        return a + b
''', "torch.randn(2, 3, 5, 4), torch.randn(2, 3, 6, 4), torch.randn(2, 3, 6, 4), "
       "torch.rand(5, 6) > 0.2, torch.randn(5, 6)"),
    "constructor_helper_function_and_math": _prog('''
import math


class Model(nn.Module):
    def __init__(self, width):
        super().__init__()
        self.fc = nn.Linear(width, make_divisible(width * 1.5))
        self.scale = 1.0 / math.sqrt(width)

    def forward(self, x):
        return torch.relu(self.fc(x)) * self.scale


def make_divisible(v, divisor=8):
    return max(divisor, int(v + divisor / 2) // divisor * divisor)
''', "torch.randn(4, 10)", "[10]"),
}
