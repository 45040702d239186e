"""How an fp32 GEMM's dot form sets its speed and accuracy on tensor cores: a diagnostic.

    PYTHONPATH=src python3 benchmarks/dot_forms.py [--size 4096] [--out DIR]

One tiled Triton GEMM (plain loads, A row-major, B stored N x K as a linear layer's weight, so
both are read K-major) in five forms, beside cuBLAS fp32 and cuBLAS TF32:

* ``ieee``: fp32 FMA; ``tf32``: one TF32 product of the operands as loaded (the tensor cores
  truncate them); ``tf32x3``: Triton's three-product split, made in registers each k-step;
* ``tf32_rn``: one TF32 product of operands rounded to nearest in registers (the compiler's
  ``_tf32_round`` under the tf32 preset);
* ``split3``: 3xTF32 from operands split once, before the product, into TF32-exact high and
  low buffers (``split``), so every tile the dots read is a plain load that Triton copies
  asynchronously; the split's own pass is timed apart.

Each form's time (median of CUDA events, L2 flushed) and relative RMS error against a float64
product; nothing here is judged, so the numbers are for the compiler's developers. The question
it answers: whether splitting outside the main loop buys back what the register-side split and
rounding cost (a720e34: rounding in registers made TF32 GEMMs 25-65% slower on an H200).
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

import torch
import triton
import triton.language as tl

from gpu_timing import median_ms

FORMS = ("ieee", "tf32", "tf32x3", "tf32_rn", "split3")
TILES = ((128, 128, 32, 8, 3), (128, 256, 32, 8, 3), (256, 128, 32, 8, 3), (64, 64, 32, 4, 4))


@triton.jit
def _rn(x):
    bits = x.to(tl.uint32, bitcast=True)
    return ((bits + 0x1000) & 0xFFFFE000).to(tl.float32, bitcast=True)


@triton.jit
def _split_kernel(x_ptr, hi_ptr, lo_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    x = tl.load(x_ptr + offs, mask=m)
    hi = _rn(x)
    tl.store(hi_ptr + offs, hi, mask=m)
    tl.store(lo_ptr + offs, _rn(x - hi), mask=m)


@triton.jit
def _gemm(a_ptr, b_ptr, a2_ptr, b2_ptr, c_ptr, M, N, K, FORM: tl.constexpr,
          BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    """C = A @ B^T over whole tiles (M, N, K multiples of the tile): A (M, K), B (N, K)."""
    pid = tl.program_id(0)
    tiles_m, tiles_n = M // BM, N // BN
    group = 8 * tiles_n  # grouped order: 8 rows of tiles share B's columns in L2
    first_m = (pid // group) * 8
    rows = tl.minimum(tiles_m - first_m, 8)
    rm = (first_m + (pid % group) % rows) * BM + tl.arange(0, BM)
    rn = ((pid % group) // rows) * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    acc = tl.zeros([BM, BN], dtype=tl.float32)
    for k in range(0, K, BK):
        a_off = rm[:, None] * K + (k + rk)[None, :]
        b_off = rn[None, :] * K + (k + rk)[:, None]
        a = tl.load(a_ptr + a_off)
        b = tl.load(b_ptr + b_off)
        if FORM == 0:
            acc += tl.dot(a, b, input_precision="ieee")
        elif FORM == 1:
            acc += tl.dot(a, b, input_precision="tf32")
        elif FORM == 2:
            acc += tl.dot(a, b, input_precision="tf32x3")
        elif FORM == 3:
            acc += tl.dot(_rn(a), _rn(b), input_precision="tf32")
        else:  # a, b are the high parts; the small products first, as tf32x3 orders them
            a2 = tl.load(a2_ptr + a_off)
            b2 = tl.load(b2_ptr + b_off)
            acc += tl.dot(a, b2, input_precision="tf32")
            acc += tl.dot(a2, b, input_precision="tf32")
            acc += tl.dot(a, b, input_precision="tf32")
    tl.store(c_ptr + rm[:, None] * N + rn[None, :], acc)


def split(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(high, low): x's nearest TF32 and the nearest TF32 of what is left."""
    hi, lo = torch.empty_like(x), torch.empty_like(x)
    _split_kernel[(triton.cdiv(x.numel(), 1024),)](x, hi, lo, x.numel(), BLOCK=1024)
    return hi, lo


def product(form: str, a: torch.Tensor, b_nk: torch.Tensor, tile=TILES[0],
            parts: tuple | None = None) -> torch.Tensor:
    """A @ B^T in ``form``; ``parts``: (a_hi, a_lo, b_hi, b_lo) for split3 (made when None)."""
    (M, K), N = a.shape, b_nk.shape[0]
    bm, bn, bk, warps, stages = tile
    c = torch.empty((M, N), device=a.device, dtype=torch.float32)
    if form == "split3":
        a_hi, a_lo, b_hi, b_lo = parts or (*split(a), *split(b_nk))
        args = (a_hi, b_hi, a_lo, b_lo)
    else:
        args = (a, b_nk, a, b_nk)
    grid = ((M // bm) * (N // bn),)
    _gemm[grid](*args, c, M, N, K, FORMS.index(form), BM=bm, BN=bn, BK=bk, num_warps=warps,
                num_stages=stages)
    return c


def _rel(c: torch.Tensor, oracle: torch.Tensor) -> float:
    return float((c.double() - oracle).norm() / oracle.norm())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=4096)
    parser.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", "dot_forms")))
    args = parser.parse_args()
    n = args.size
    torch.manual_seed(0)
    a, b = torch.randn(n, n, device="cuda"), torch.randn(n, n, device="cuda")
    oracle = a.double() @ b.double().T
    rows = []
    for tf32 in (False, True):
        torch.backends.cuda.matmul.allow_tf32 = tf32
        ms = median_ms(lambda: a @ b.T, 20)
        rows.append({"form": "cublas_tf32" if tf32 else "cublas_fp32", "tile": None, "ms": ms,
                     "rel_err": _rel(a @ b.T, oracle)})
    torch.backends.cuda.matmul.allow_tf32 = False
    parts = (*split(a), *split(b))
    rows.append({"form": "split_pass", "tile": None, "ms": median_ms(
        lambda: (split(a), split(b)), 20), "rel_err": None})
    for form in FORMS:
        for tile in TILES:
            try:
                c = product(form, a, b, tile, parts)
                ms = median_ms(lambda f=form, t=tile: product(f, a, b, t, parts), 20)
            except Exception as exc:  # a tile past the GPU's shared memory: skip it
                print(f"{form} {tile}: {type(exc).__name__}: {str(exc)[:120]}", flush=True)
                continue
            rows.append({"form": form, "tile": tile, "ms": ms, "rel_err": _rel(c, oracle)})
    flops = 2 * n**3
    for r in rows:
        r["tflops"] = None if r["form"] == "split_pass" else flops / r["ms"] / 1e9
    args.out.mkdir(parents=True, exist_ok=True)
    meta = {"gpu": torch.cuda.get_device_name(), "torch": torch.__version__,
            "triton": triton.__version__, "size": n}
    (args.out / "dot_forms.json").write_text(json.dumps({**meta, "rows": rows}, indent=1))
    best = {}
    for r in rows:
        if r["form"] not in best or r["ms"] < best[r["form"]]["ms"]:
            best[r["form"]] = r
    print(f"{'form':<12} {'tile':<22} {'ms':>8} {'TFLOP/s':>8} {'rel_err':>9}")
    for r in best.values():
        err = "-" if r["rel_err"] is None else f"{r['rel_err']:.2e}"
        rate = "-" if r["tflops"] is None else f"{r['tflops']:.1f}"
        print(f"{r['form']:<12} {str(r['tile']):<22} {r['ms']:8.3f} {rate:>8} {err:>9}")


if __name__ == "__main__":
    main()
