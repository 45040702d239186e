"""Compiler configuration and its one error type."""

from __future__ import annotations

from dataclasses import dataclass

MODES = ("strict", "hybrid")
DEVICES = ("cpu", "cuda")
PRECISIONS = ("fp32", "tf32")
CAPTURES = ("auto", "fx", "export")


@dataclass(frozen=True)
class CompilerConfig:
    """How to compile.

    mode: ``strict`` puts all compute in Triton; ``hybrid`` lets convolution and matmul call the
    vendor libraries (``torch.matmul``, ``F.conv*``) with everything around them fused in Triton.
    device: ``cpu`` emits fixed small blocks for the Triton interpreter (``TRITON_INTERPRET=1``);
    ``cuda`` emits a small ``triton.autotune`` space per kernel.
    max_fused_nodes: an elementwise expression larger than this is materialised rather than
    recomputed by each consumer.
    max_window_recompute: a computed input of a pooling, convolution or (strict) matmul kernel is
    re-evaluated at every read, and kernels with windows or tiles read each input element many
    times. It is materialised first when its cost (``ir.op_cost``: 1 per operator, 4 per special
    function) times the reads of each element exceeds this (``float("inf")``: always fused, as
    before this setting existed).
    precision: what GPU matrix products and convolutions may round to: ``fp32`` (3xTF32
    tensor-core products, as accurate as fp32: the judge's ``hardened`` preset) or ``tf32`` (one
    TF32 product of operands rounded to the nearest TF32, as cuBLAS rounds them: the ``tf32``
    preset, against baselines that also run TF32). The interpreter computes in fp32 either way.
    max_tuned_configs: ``cuda``: the autotuning configs a program's kernels may have in all.
    Converting compiles every config once (about a second each on a GPU), so a whole model's
    hundreds of kernels would take minutes; past this budget the kernels doing the least work
    launch with the middle config of their space, fixed, and say so in a comment. 96 leaves the
    real-model suite's blocks whole (at most 76 configs each at their published sizes) and
    bounds its whole models (ResNet-18 163, MobileNetV2 353 in strict).
    capture: how the reference's forward becomes a graph: ``fx`` (``torch.fx`` symbolic
    tracing: ``nn`` modules with a lowering of their own stay whole, e.g. an LSTM's per-step
    kernel), ``export`` (``torch.export`` at the ATen level: every module whose decomposition
    is made of supported ops converts, ``compiler.aten_capture``), or ``auto``: ``fx``, and
    ``export`` where ``fx`` cannot capture or lower the program.
    triton_products: ``hybrid`` only: the matrix products and convolutions that stay in Triton,
    by their number in lowering order (``compiler.compile_with_products`` lists them); the others
    call the vendor library. Empty: all of them call it. On a GPU, converting in hybrid mode
    measures which products to keep (``compiler.convert``).
    """

    mode: str = "strict"
    device: str = "cpu"
    max_fused_nodes: int = 64
    max_window_recompute: float = 64.0
    precision: str = "fp32"
    max_tuned_configs: int = 96
    capture: str = "auto"
    triton_products: frozenset[int] = frozenset()

    def __post_init__(self) -> None:
        if self.triton_products and self.mode != "hybrid":
            raise ValueError("triton_products applies to hybrid mode only")
        if any(not isinstance(i, int) or i < 0 for i in self.triton_products):
            raise ValueError(f"triton_products must be indices >= 0, got "
                             f"{sorted(self.triton_products, key=str)}")
        if self.max_tuned_configs < 0:
            raise ValueError(f"max_tuned_configs must be >= 0, got {self.max_tuned_configs}")
        if self.precision not in PRECISIONS:
            raise ValueError(f"precision must be one of {PRECISIONS}, got {self.precision!r}")
        if self.capture not in CAPTURES:
            raise ValueError(f"capture must be one of {CAPTURES}, got {self.capture!r}")
        if self.mode not in MODES:
            raise ValueError(f"mode must be one of {MODES}, got {self.mode!r}")
        if self.device not in DEVICES:
            raise ValueError(f"device must be one of {DEVICES}, got {self.device!r}")


class Unsupported(Exception):
    """Raised inside a lowering; ``Lowering`` turns it into UnsupportedOperatorError with the
    node's source line."""


class UnsupportedOperatorError(ValueError):
    """The program uses an operator (or a form of one) the compiler cannot lower."""

    def __init__(self, operator: str, line: int = 0, text: str = "", reason: str = ""):
        self.operator, self.line, self.text, self.reason = operator, line, text, reason
        where = f" at line {line}: {text}" if line else ""
        why = f" ({reason})" if reason else ""
        super().__init__(f"unsupported operator {operator}{where}{why}")
