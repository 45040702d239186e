"""Synthesis scales: plain size limits, importable without OR-Tools (records and benchmarks read
them on machines that never synthesize)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ScaleLimits:
    """Size limits of one synthesis scale (see ``SCALES``)."""

    name: str
    max_dim: int
    min_numel: int
    max_numel: int
    flops_lo: int  # lower end of the program FLOP band (relaxed downward when infeasible)
    flops_hi: int
    max_total_numel: int  # sum of the sizes of all tensors of a program
    kernel_min: int
    kernel_max: int
    stride_max: int
    dilation_max: int
    groups_max: int
    pad_sum_max: int  # 2 * padding <= this for convolutions


SCALES: dict[str, ScaleLimits] = {
    # The published generator's band: GPU-sized programs for training and evaluation.
    "gpu": ScaleLimits("gpu", 8192, 2**5, 2**30, 2**34, 2**35, 4 * 2**30, 3, 15, 15, 15, 32, 15),
    # Sizes that the Triton interpreter runs in seconds on a CPU (tests, CPU pipelines).
    "small": ScaleLimits("small", 64, 2**5, 2**12, 2**16, 2**20, 2**16, 3, 5, 3, 2, 4, 4),
}
