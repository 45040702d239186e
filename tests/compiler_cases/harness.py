"""Test harness for the compiler: render small KernelBench programs, compile, compare in-process.

``check(source, mode)`` compiles ``source``, builds ``Model`` and ``ModelNew`` under the same seed
(as the judge does), runs both on the reference's inputs under the Triton interpreter and asserts
shapes, dtypes and values match. Import after setting ``TRITON_INTERPRET=1``.
"""

from __future__ import annotations

import types

import torch

from drtriton.compiler import CompilerConfig, compile_program
from drtriton.program import as_output_tuple, importable, load_program

HEAD = "import torch\nimport torch.nn as nn\nimport torch.nn.functional as F\n\n\n"


def program(body: str, shapes: list[tuple[int, ...]], init: str = "", init_args: str = "") -> str:
    """A KernelBench program whose forward takes inputs a, b, c, ... and runs ``body``."""
    names = "abcdefgh"[: len(shapes)]
    lines = [ln for ln in body.strip().splitlines()]
    fwd = "\n".join("        " + ln for ln in lines)
    init_lines = "\n".join("        " + ln for ln in init.strip().splitlines()) if init else ""
    params = ", ".join(
        ["self", *[a.split("=")[0].strip() for a in init_args.split(",") if a.strip()]]
    )
    init_vals = ", ".join(a.split("=")[1].strip() for a in init_args.split(",") if a.strip())
    inputs = ", ".join(f"torch.randn{s!r}" for s in shapes)
    return (
        HEAD
        + "class Model(nn.Module):\n"
        + f"    def __init__({params}):\n        super().__init__()\n{init_lines}\n\n"
        + f"    def forward(self, {', '.join(names)}):\n{fwd}\n\n\n"
        + f"def get_inputs():\n    return [{inputs}]\n\n\n"
        + f"def get_init_inputs():\n    return [{init_vals}]\n"
    )


def run_pair(source: str, candidate: str, seed: int = 0):
    ref = load_program(source, "reference")
    cand = types.ModuleType("candidate")
    with importable(cand):
        exec(compile(candidate, "<candidate>", "exec"), cand.__dict__)
    init = ref.get_init_inputs()
    torch.manual_seed(seed)
    m_ref = ref.Model(*init)
    torch.manual_seed(seed)
    m_new = cand.ModelNew(*init)
    torch.manual_seed(seed + 1)
    inputs = ref.get_inputs()
    def fresh() -> list:  # tensors cloned; Python scalars passed as they are
        return [x.clone() if isinstance(x, torch.Tensor) else x for x in inputs]

    with torch.no_grad():
        want = as_output_tuple(m_ref(*fresh()))
        got = as_output_tuple(m_new(*fresh()))
    return want, got


def check(source: str, mode: str = "strict", atol: float = 1e-4, rtol: float = 1e-4,
          equal_nan: bool = True, capture: str = "auto") -> str:
    """Compile ``source`` for the interpreter and compare every output with PyTorch's (shape,
    dtype, values); returns the candidate."""
    candidate = compile_program(source, CompilerConfig(mode=mode, device="cpu", capture=capture))
    want, got = run_pair(source, candidate)
    assert len(want) == len(got)
    for w, g in zip(want, got, strict=True):
        assert w.shape == g.shape, (w.shape, g.shape)
        assert w.dtype == g.dtype, (w.dtype, g.dtype)
        if w.dtype.is_floating_point:
            torch.testing.assert_close(g, w, atol=atol, rtol=rtol, equal_nan=equal_nan)
        else:
            assert torch.equal(g, w)
    return candidate


def round_mantissa(x: torch.Tensor, drop: int) -> torch.Tensor:
    """fp32 ``x`` rounded to nearest (ties away from zero) with its low ``drop`` mantissa bits
    cleared: 13 gives TF32, 16 bf16."""
    bits = x.view(torch.int32)
    return ((bits + (1 << (drop - 1))) & ~((1 << drop) - 1)).view(torch.float32)
