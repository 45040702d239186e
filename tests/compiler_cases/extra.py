"""Beyond the catalogue: scalar/int arithmetic, shape queries, splits, scalar outputs, fn forms."""

from __future__ import annotations

# name -> (forward body, input shapes)
CASES: dict[str, tuple[str, list[tuple[int, ...]]]] = {
    "floor_ceil_round_sign": (
        "return torch.floor(a) + torch.ceil(a) * torch.round(a * 3) - torch.sign(a)",
        [(4, 7)],
    ),
    "pow_rsqrt_log2": (
        "return torch.pow(torch.abs(a) + 1, 1.7) + torch.rsqrt(torch.abs(a) + 1)"
        " + torch.log2(torch.abs(a) + 1) + a ** 3 + 2 ** a",
        [(4, 7)],
    ),
    "where_cmp": ("return torch.where(a > 0, a, 0.1 * a) + (a < b).float()", [(4, 7), (7,)]),
    "view_size": ("x = a.view(a.size(0), -1)\nreturn x.mean(dim=1) + x.std(dim=1)", [(3, 4, 5)]),
    "mean_23": (
        "return a.mean(dim=(2, 3)) + F.adaptive_avg_pool2d(a, 1).flatten(1)",
        [(2, 3, 4, 5)],
    ),
    "scalar_out": ("return a.sum(), torch.max(a), a.mean()", [(3, 4)]),
    "normalize_lse": (
        "return F.normalize(a, dim=1) + torch.logsumexp(a, dim=1, keepdim=True)",
        [(3, 9)],
    ),
    "max_dim": ("v, i = torch.max(a, dim=1)\nreturn v * i.float()", [(3, 9)]),
    "split_unbind": (
        "x, y = torch.split(a, [2, 3], dim=1)\np, q, r = y.unbind(1)\nreturn x.sum(1) + p * q - r",
        [(4, 5)],
    ),
    "expand_repeat_cat": (
        "x = a.unsqueeze(1).expand(-1, 3, -1)\n"
        "return torch.cat([x, x * 2], dim=-1).permute(2, 0, 1)",
        [(2, 4)],
    ),
    "int_arith": ("i = torch.argmax(a, dim=1)\nreturn i + 1, (i * 2).float() / 3", [(3, 9)]),
    "tanh_gelu_mish": (
        "return F.gelu(a, approximate='tanh') + F.mish(a) + F.hardswish(a) + F.relu6(a * 4)",
        [(3, 9)],
    ),
    "layernorm_affine_fn": ("return F.layer_norm(a, (9,), b, c, 1e-6)", [(3, 9), (9,), (9,)]),
    "linear_fn_3d": ("return F.linear(a, b, c)", [(2, 3, 9), (5, 9), (5,)]),
    "matmul_vec": (
        "return torch.matmul(a, b) + torch.matmul(b, a.transpose(0, 1)).sum()",
        [(4, 9), (9,)],
    ),
}
