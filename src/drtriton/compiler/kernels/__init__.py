"""Triton kernel templates, one module per family: each writes the source of one
``@triton.jit`` kernel.

A ``Writer`` holds one kernel under construction. Templates (``pointwise``, ``rowwise``, ``scan``,
``matmul``, ``conv``, ``pool``) lay out the iteration space and call ``Writer.ev`` to evaluate the
lazy input expressions (``ir.Expr``) at index expressions, which is how elementwise prologues,
broadcasting and views fuse into the kernel. ``Writer.store`` writes the result, optionally through
a fused elementwise epilogue. Shapes and strides are baked into the kernel as literals (the
candidate is specialised to the reference's input shapes, as KernelBench evaluates it).
"""

from drtriton.compiler.kernels.matmul import matmul
from drtriton.compiler.kernels.pointwise import pointwise
from drtriton.compiler.kernels.reductions import rowwise, scan
from drtriton.compiler.kernels.spatial import (
    ConvSpec,
    conv,
    conv_channels_last,
    conv_depthwise,
    conv_merged_taps,
    pool,
)
from drtriton.compiler.kernels.writer import (
    CPU_BLOCKS,
    CUDA_BLOCKS,
    HELPERS,
    TL_DTYPES,
    Blocks,
    Epilogue,
    Kernel,
    Writer,
    next_pow2,
)

__all__ = [
    "CPU_BLOCKS", "CUDA_BLOCKS", "HELPERS", "TL_DTYPES", "Blocks", "ConvSpec", "Epilogue", "Kernel",
    "Writer", "conv", "conv_channels_last", "conv_depthwise", "conv_merged_taps", "matmul",
    "next_pow2", "pointwise", "pool", "rowwise", "scan",
]
