"""The built-in compiler: PyTorch program (KernelBench format) -> standalone Triton candidate.

    from drtriton.compiler import CompilerConfig, compile_program
    config = CompilerConfig(mode="strict", device="cpu")
    candidate_source = compile_program(reference_source, config)

Pipeline: ``capture`` (torch.fx trace + shape propagation + constructor extraction) -> ``lower``
(per-op lowerings in ``lowerings`` build lazy pointwise expressions and kernels, with prologue and
epilogue fusion) -> ``emit`` (one file, only torch/triton imports, ``ModelNew``). See
docs/compiler.md. Anything it cannot lower raises ``UnsupportedOperatorError`` naming the operator
and the source line; it never emits a program it knows to be wrong.
"""

from __future__ import annotations

import dataclasses

import torch

from drtriton.compiler import lowerings as _lowerings  # noqa: F401  (fills the dispatch tables)
from drtriton.compiler.aten_capture import capture_exported
from drtriton.compiler.capture import capture
from drtriton.compiler.config import CompilerConfig, UnsupportedOperatorError
from drtriton.compiler.emit import emit
from drtriton.compiler.lower import MODULES, Lowering, Product
from drtriton.compiler.tune import Tuning
from drtriton.program import TORCH_STATE_LOCK

__all__ = ["CompilerConfig", "Product", "Tuning", "UnsupportedOperatorError", "compile_program",
           "compile_with_products", "kernel_body"]


def kernel_body(candidate: str) -> str:
    """A compiler candidate without its first line, the docstring line naming the mode: two
    candidates with the same body are the same program (the hybrid mode wrote the same kernels)."""
    return candidate.split("\n", 1)[-1]


def compile_program(source: str, config: CompilerConfig | None = None,
                    tuning: Tuning | None = None) -> str:
    """Compile a KernelBench-format reference into candidate source text defining ``ModelNew``.
    ``tuning`` (from ``tune.measure_choices`` on this program's autotuned candidate) fixes each
    named kernel's launch to its chosen config."""
    return compile_with_products(source, config, tuning)[0]


def compile_with_products(source: str, config: CompilerConfig | None = None,
                          tuning: Tuning | None = None) -> tuple[str, tuple[Product, ...]]:
    """``compile_program``'s candidate and the program's matrix products and convolutions in
    lowering order: ``CompilerConfig.triton_products`` numbers them so."""
    config = config or CompilerConfig()
    with TORCH_STATE_LOCK:  # tracing (and lowering its graph) is not thread-safe
        cap, prog = _captured_and_lowered(source, config, tuning)
        if config.device == "cpu":
            _refuse_bfloat16(cap)
        if config.mode == "hybrid" and not prog.kernels:
            # Everything went to the vendor libraries (a lone matmul or convolution), but a
            # candidate must launch Triton: such a program is compiled strict instead.
            config = dataclasses.replace(config, mode="strict", triton_products=frozenset())
            prog = Lowering(cap, config, tuning).run()  # reads the capture, never changes it
        unknown = set(tuning.as_dict() if tuning else ()) - {k.name for k in prog.kernels
                                                             if k.configs}
        if unknown:
            raise ValueError(f"tuning names kernels this program has not: {sorted(unknown)}")
        return emit(cap, prog, config), tuple(prog.products)


def _refuse_bfloat16(cap) -> None:
    """The Triton interpreter (``device="cpu"``) computes bfloat16 arithmetic wrongly (``x + x``
    of a bfloat16 tensor gave values near 1e37): refuse such programs there in one line."""
    for node in cap.gm.graph.nodes:
        meta = node.meta.get("tensor_meta")
        if getattr(meta, "dtype", None) == torch.bfloat16:
            raise UnsupportedOperatorError(
                "bfloat16", 0, "", "the Triton interpreter (CPU) cannot run bfloat16 kernels: "
                "convert on a GPU (--device cuda)")


def _captured_and_lowered(source: str, config: CompilerConfig, tuning: Tuning | None):
    """The capture ``config.capture`` names and its lowering; ``auto`` tries ``torch.fx``
    first and ``torch.export`` where that fails, and reports the fx error if both fail (it
    names the program's own calls, not ATen ops; the operator export stopped at, where another,
    is added to its reason), unless fx could not trace the forward at all
    (an assignment into a tensor): then the later capture's error, which names the operator and
    line where it can, and otherwise says what stopped it (data-dependent shapes)."""
    errors = []
    for capture_with in CAPTURES_TRIED[config.capture]:
        try:
            cap = capture_with(source)
            return cap, Lowering(cap, config, tuning).run()
        except UnsupportedOperatorError as exc:
            errors.append(exc)
    named = [e for e in errors if e.line]
    if len(named) > 1 and named[1].operator != named[0].operator:
        first, later = named[0], named[1]  # both captures named an operator: say both
        also = f"torch.export stops at {later.operator} at line {later.line}"
        raise UnsupportedOperatorError(
            first.operator, first.line, first.text,
            f"{first.reason}; {also}" if first.reason else also) from first
    raise named[0] if named else errors[-1]


def _capture_fx(source: str):
    return capture(source, frozenset(MODULES))  # other modules are traced through


CAPTURES_TRIED = {"fx": (_capture_fx,), "export": (capture_exported,),
                  "auto": (_capture_fx, capture_exported)}
