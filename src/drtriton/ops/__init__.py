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

import importlib

# Names resolve on first use (PEP 562): ``catalogue`` and ``shapes`` need OR-Tools, and a machine
# that only reads stored programs (a benchmark on a GPU host) imports ``drtriton.ops.scales``.
_HOMES = {"OPS": "catalogue", "OP_NAMES": "catalogue", "get_op": "catalogue",
          "SCALES": "scales", "ScaleLimits": "scales", "Applied": "shapes", "Dim": "shapes",
          "OpSpec": "shapes", "ShapeBuilder": "shapes", "TensorVar": "shapes", "Value": "shapes"}

__all__ = sorted(_HOMES)


def __getattr__(name: str):
    if name not in _HOMES:
        raise AttributeError(f"module 'drtriton.ops' has no attribute {name!r}")
    return getattr(importlib.import_module(f"drtriton.ops.{_HOMES[name]}"), name)
