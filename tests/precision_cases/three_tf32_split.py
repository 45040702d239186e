"""3xTF32: each operand split into a TF32 high part and a TF32 remainder, three products summed: as
accurate as fp32, accepted."""

import torch
import torch.nn as nn
import triton
import triton.language as tl

EXPECTED = "correct"


@triton.jit
def rounded(v, DROP: tl.constexpr):
    """``v`` with its lowest DROP mantissa bits rounded away (13: TF32, 16: bf16)."""
    bits = v.to(tl.int32, bitcast=True)
    bits = (bits + (1 << (DROP - 1))) & ~((1 << DROP) - 1)
    return bits.to(tl.float32, bitcast=True)


@triton.jit
def matmul_kernel(x_ptr, w_ptr, out_ptr, M, N, K, BM: tl.constexpr, BN: tl.constexpr,
                  BK: tl.constexpr):
    rm = tl.program_id(0) * BM + tl.arange(0, BM)
    rn = tl.program_id(1) * BN + tl.arange(0, BN)
    acc = tl.zeros([BM, BN], dtype=tl.float32)
    other = tl.zeros([BM, BN], dtype=tl.float32)
    for k in range(0, K, BK):
        rk = k + tl.arange(0, BK)
        a = tl.load(
            x_ptr + rm[:, None] * K + rk[None, :],
            mask=(rm[:, None] < M) & (rk[None, :] < K),
            other=0.0,
        )
        b = tl.load(
            w_ptr + rk[:, None] * N + rn[None, :],
            mask=(rk[:, None] < K) & (rn[None, :] < N),
            other=0.0,
        )
        ah, bh = rounded(a, 13), rounded(b, 13)
        al, bl = rounded(a - ah, 13), rounded(b - bh, 13)
        acc += tl.dot(ah, bh, input_precision="ieee")
        other += tl.dot(ah, bl, input_precision="ieee") + tl.dot(al, bh, input_precision="ieee")
    tl.store(
        out_ptr + rm[:, None] * N + rn[None, :],
        acc + other,
        mask=(rm[:, None] < M) & (rn[None, :] < N),
    )


class ModelNew(nn.Module):
    def forward(self, x, w):
        M, K = x.shape
        N = w.shape[1]
        out = torch.empty(M, N, device=x.device, dtype=torch.float32)
        matmul_kernel[(triton.cdiv(M, 32), triton.cdiv(N, 32))](
            x, w, out, M, N, K, BM=32, BN=32, BK=32
        )
        return out
