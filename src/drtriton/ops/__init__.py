"""The operator catalogue: the 61 operators of CSP-DAG synthesis, each described once.

Every ``OpSpec`` says how the operator is written in PyTorch, which input ranks it accepts, how its
output shape follows from its inputs as CP-SAT constraints on integer dimension variables, and its
FLOP model. The synthesizer (``drtriton.synth``) builds programs from it; the compiler and fragment
search use the same names (``OPS``, ``OP_NAMES``, ``get_op``).

Shapes are lists of dimension variables, right-aligned like PyTorch broadcasting. Structural choices
(which dim to reduce, which broadcast slots are 1, keepdim, activation constants) are drawn from the
seeded ``random.Random`` while the model is built; the integer sizes are left to the solver.

Layout: ``shapes`` (scales, ``ShapeBuilder``, ``OpSpec``), ``catalogue`` (the operators and their
rules). Run ``python -m drtriton.ops`` to print the catalogue.
"""

from drtriton.ops.catalogue import OP_NAMES, OPS, get_op
from drtriton.ops.shapes import (
           SCALES,
           Applied,
           Dim,
           OpSpec,
           ScaleLimits,
           ShapeBuilder,
           TensorVar,
           Value,
)

__all__ = ["OPS", "OP_NAMES", "SCALES", "Applied", "Dim", "OpSpec", "ScaleLimits", "ShapeBuilder",
           "TensorVar", "Value", "get_op"]
