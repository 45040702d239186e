"""Per-operator lowerings: PyTorch functions, tensor methods and ``nn`` modules to IR and kernels.

Each handler gets the ``Lowering`` and the node's arguments (tensors as ``ir.Expr``) and returns
the node's value. Pointwise ops and views only build expressions; the rest register kernels.
Importing this package fills the dispatch tables in ``lower``, one module per family of ops.
"""

from drtriton.compiler.lowerings import (
    complex_ops,
    einops_ops,
    elementwise,
    layers,
    losses,
    made,
    modules,
    recurrent,
    reductions,
    resample,
    scatter,
    sort,
    special,
    views,
)

__all__ = [
    "complex_ops", "einops_ops", "elementwise", "layers", "losses", "made", "modules", "recurrent",
    "reductions", "resample", "scatter", "sort", "special", "views",
]
