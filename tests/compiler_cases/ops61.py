"""The 61 catalogue operators, one small program each, in the synthesizer's spellings."""

from __future__ import annotations

from compiler_cases.harness import program

# name -> (forward body, input shapes); odd sizes on purpose
CASES: dict[str, tuple[str, list[tuple[int, ...]]]] = {
    "add": ("return torch.add(a, b)", [(3, 5, 7), (5, 1)]),
    "sub": ("return torch.sub(a, b)", [(4, 7), (7,)]),
    "mul": ("return torch.mul(a, b)", [(2, 1, 5), (3, 1)]),
    "div": ("return torch.div(a, b)", [(6, 5), (6, 5)]),
    "maximum": ("return torch.maximum(a, b)", [(3, 7), (1, 7)]),
    "minimum": ("return torch.minimum(a, b)", [(5,), (2, 3, 5)]),
    "lerp": ("return torch.lerp(a, b, c)", [(4, 5), (5,), (4, 1)]),
    "sum": ("return torch.sum(a, dim=1, keepdim=True)", [(3, 37, 5)]),
    "mean": ("return torch.mean(a, dim=0, keepdim=False)", [(7, 9)]),
    "amax": ("return torch.amax(a, dim=-1, keepdim=False)", [(4, 3, 11)]),
    "amin": ("return torch.amin(a, dim=1, keepdim=True)", [(4, 13)]),
    "argmax": ("return torch.argmax(a, dim=1, keepdim=False)", [(5, 37)]),
    "argmin": ("return torch.argmin(a, dim=0, keepdim=True)", [(9, 4)]),
    "var": ("return torch.var(a, dim=1, keepdim=False)", [(6, 19)]),
    "norm": ("return torch.norm(a, p=2, dim=-1, keepdim=True)", [(3, 4, 7)]),
    "matmul": ("return torch.matmul(a, b)", [(2, 5, 7), (7, 9)]),
    "bmm": ("return torch.bmm(a, b)", [(3, 5, 17), (3, 17, 6)]),
    "transpose": ("x = torch.transpose(a, -2, -1)\nreturn torch.add(x, b)", [(2, 3, 5), (5, 3)]),
    "relu": ("return torch.relu(a)", [(4, 9)]),
    "leaky_relu": ("return F.leaky_relu(a, negative_slope=0.2)", [(4, 9)]),
    "sigmoid": ("return torch.sigmoid(a)", [(4, 9)]),
    "tanh": ("return torch.tanh(a)", [(4, 9)]),
    "silu": ("return F.silu(a)", [(4, 9)]),
    "gelu": ("return F.gelu(a)", [(4, 9)]),
    "selu": ("return F.selu(a)", [(4, 9)]),
    "hardsigmoid": ("return F.hardsigmoid(a)", [(4, 9)]),
    "softplus": ("return F.softplus(a)", [(4, 9)]),
    "softsign": ("return F.softsign(a)", [(4, 9)]),
    "elu": ("return F.elu(a, alpha=0.7)", [(4, 9)]),
    "hardtanh": ("return F.hardtanh(a, min_val=-0.5, max_val=0.8)", [(4, 9)]),
    "clamp": ("return torch.clamp(a, min=-0.3, max=0.6)", [(4, 9)]),
    "cos": ("return torch.cos(a)", [(4, 9)]),
    "sin": ("return torch.sin(a)", [(4, 9)]),
    "exp2": ("return torch.exp2(a)", [(4, 9)]),
    "logsigmoid": ("return F.logsigmoid(a)", [(4, 9)]),
    "abs": ("return torch.abs(a)", [(4, 9)]),
    "triu": ("return torch.triu(a, diagonal=1)", [(2, 5, 7)]),
    "tril": ("return torch.tril(a, diagonal=-1)", [(7, 5)]),
    "softmax": ("return torch.softmax(a, dim=1)", [(3, 37, 4)]),
    "log_softmax": ("return torch.log_softmax(a, dim=-1)", [(5, 37)]),
    "cumsum": ("return torch.cumsum(a, dim=1)", [(3, 37)]),
    "cummax": ("return torch.cummax(a, dim=0).values", [(9, 4)]),
    "cummin": ("return torch.cummin(a, dim=-1).values", [(2, 3, 11)]),
    "batch_norm": ("return F.batch_norm(a, None, None, training=True)", [(4, 3, 5, 5)]),
    "layer_norm": ("return F.layer_norm(a, (5, 7))", [(3, 5, 7)]),
    "group_norm": ("return F.group_norm(a, 2)", [(2, 6, 5)]),
    "instance_norm": ("return F.instance_norm(a)", [(2, 3, 4, 5)]),
    "avg_pool1d": ("return F.avg_pool1d(a, kernel_size=3, stride=2, padding=1)", [(2, 3, 11)]),
    "avg_pool2d": ("return F.avg_pool2d(a, kernel_size=2, stride=2, padding=0)", [(1, 2, 7, 6)]),
    "avg_pool3d": ("return F.avg_pool3d(a, kernel_size=3, stride=1, padding=1)", [(1, 2, 4, 5, 3)]),
    "max_pool1d": (
        "return F.max_pool1d(a, kernel_size=3, stride=2, padding=1, dilation=1)",
        [(2, 3, 11)],
    ),
    "max_pool2d": (
        "return F.max_pool2d(a, kernel_size=2, stride=1, padding=1, dilation=2)",
        [(1, 2, 7, 6)],
    ),
    "max_pool3d": (
        "return F.max_pool3d(a, kernel_size=2, stride=2, padding=0, dilation=1)",
        [(1, 2, 5, 4, 5)],
    ),
    "conv1d": (
        "return F.conv1d(a, b, stride=2, padding=1, dilation=1, groups=1)",
        [(2, 3, 11), (4, 3, 3)],
    ),
    "conv2d": (
        "return F.conv2d(a, b, stride=1, padding=1, dilation=2, groups=2)",
        [(1, 4, 7, 6), (6, 2, 3, 2)],
    ),
    "conv3d": (
        "return F.conv3d(a, b, stride=1, padding=0, dilation=1, groups=1)",
        [(1, 2, 4, 5, 3), (3, 2, 2, 3, 2)],
    ),
    "conv_transpose1d": (
        "return F.conv_transpose1d(a, b, "
        "stride=2, padding=1, output_padding=1, groups=1, dilation=1)",
        [(2, 3, 5), (3, 4, 3)],
    ),
    "conv_transpose2d": (
        "return F.conv_transpose2d(a, b, "
        "stride=2, padding=0, output_padding=0, groups=2, dilation=1)",
        [(1, 4, 3, 4), (4, 3, 2, 3)],
    ),
    "conv_transpose3d": (
        "return F.conv_transpose3d(a, b, "
        "stride=1, padding=1, output_padding=0, groups=1, dilation=2)",
        [(1, 2, 3, 4, 3), (2, 3, 2, 2, 3)],
    ),
    "cat": ("return torch.cat([a, b], dim=1)", [(3, 4, 5), (3, 2, 5)]),
    "stack": ("return torch.stack([a, b], dim=2)", [(3, 4, 5), (3, 4, 5)]),
}


def source(name: str) -> str:
    body, shapes = CASES[name]
    return program(body, shapes)
