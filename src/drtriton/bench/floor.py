"""The physical floor of a program: its FLOPs at the fp32 FMA rate and its minimum bytes at the
copy bandwidth, both measured on the machine that runs the benchmark.

``measure_rates(device)`` times a Triton kernel of independent FMA chains (registers only, no
memory traffic in its loop) and a device-to-device copy; ``floor_ms(cost, rates)`` is the larger
of the two times, the lower bound a program's runtime is reported against. A kernel on tensor
cores (3xTF32) can beat the fp32 FMA floor: the ratio is then below 1, as measured.
"""

from __future__ import annotations

import functools
import statistics

FMA_CHAINS = 8  # independent chains per element: enough to hide the FMA latency
COPY_BYTES = 1 << 30


@functools.cache
def _fma_kernel():
    """The FMA-chain kernel, made on first use (importing this module needs no Triton)."""
    import triton
    import triton.language as tl

    @triton.jit
    def fma_chains(x_ptr, out_ptr, iters, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        x = tl.load(x_ptr + offs)
        a0, a1, a2, a3 = x, x + 1.0, x + 2.0, x + 3.0
        a4, a5, a6, a7 = x + 4.0, x + 5.0, x + 6.0, x + 7.0
        for _ in range(iters):
            a0 = a0 * 0.9999 + 0.0001
            a1 = a1 * 0.9999 + 0.0001
            a2 = a2 * 0.9999 + 0.0001
            a3 = a3 * 0.9999 + 0.0001
            a4 = a4 * 0.9999 + 0.0001
            a5 = a5 * 0.9999 + 0.0001
            a6 = a6 * 0.9999 + 0.0001
            a7 = a7 * 0.9999 + 0.0001
        tl.store(out_ptr + offs, a0 + a1 + a2 + a3 + a4 + a5 + a6 + a7)

    return fma_chains


def fma_tflops(device: str, elements: int = 1 << 22, iters: int = 2048, repeats: int = 5) -> float:
    """fp32 TFLOP/s of the FMA-chain kernel (2 FLOPs per FMA)."""
    import torch

    x = torch.rand(elements, device=device)
    out = torch.empty_like(x)
    block = 256
    grid = (elements // block,)

    def run() -> None:
        _fma_kernel()[grid](x, out, iters, BLOCK=block)

    seconds = _median_seconds(run, device, repeats)
    return 2.0 * FMA_CHAINS * elements * iters / seconds / 1e12


def copy_gbs(device: str, nbytes: int = COPY_BYTES, repeats: int = 5) -> float:
    """Device-to-device copy bandwidth, GB/s of bytes read plus written."""
    import torch

    src = torch.empty(nbytes // 4, dtype=torch.float32, device=device).uniform_()
    dst = torch.empty_like(src)
    seconds = _median_seconds(lambda: dst.copy_(src), device, repeats)
    return 2.0 * nbytes / seconds / 1e9


def measure_rates(device: str) -> dict:
    """``{"fp32_tflops", "copy_gbs"}`` measured on ``device`` now."""
    return {"fp32_tflops": round(fma_tflops(device), 2), "copy_gbs": round(copy_gbs(device), 1)}


def floor_ms(cost: dict, rates: dict) -> float | None:
    """The larger of FLOPs at the FMA rate and minimum bytes at the copy bandwidth (ms); None
    without a cost or rates."""
    flops, nbytes = cost.get("flops"), cost.get("min_bytes")
    tflops, gbs = rates.get("fp32_tflops"), rates.get("copy_gbs")
    if flops is None or nbytes is None or not tflops or not gbs:
        return None
    return max(flops / (tflops * 1e12), nbytes / (gbs * 1e9)) * 1e3


def _median_seconds(run, device: str, repeats: int) -> float:
    import time

    import torch

    run()  # compile and warm up
    on_gpu = device.startswith("cuda")
    times = []
    for _ in range(repeats):
        if on_gpu:
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            run()
            end.record()
            end.synchronize()
            times.append(start.elapsed_time(end) / 1e3)
        else:
            began = time.perf_counter()
            run()
            times.append(time.perf_counter() - began)
    return statistics.median(times)
