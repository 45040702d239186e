"""Compare a candidate's outputs with the reference's: what "correct" means, to the element.

Shapes and dtypes must match exactly, integer and bool outputs exactly, float outputs within the
preset's ``|a - e| <= atol + rtol * |e|`` with the NaN/Inf pattern identical. The arithmetic runs
in float64, in chunks, on the judge's device (``tests/test_judge.py`` covers the rules).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from drtriton.judge.config import JudgeConfig


@dataclass(frozen=True)
class Comparison:
    ok: bool
    reason: str
    max_abs_err: float
    max_rel_err: float


def compare_outputs(
    expected: tuple[torch.Tensor, ...], actual: list, config: JudgeConfig, device: str = "cpu"
) -> Comparison:
    """Shapes, dtypes, the NaN/Inf pattern, then ``|a - e| <= atol + rtol * |e|`` elementwise.

    Relative error is reported as ``|a - e| / max(|e|, 1e-6)``. ``device`` is where the float64
    arithmetic runs: the judge passes its own GPU, where a GPU-scale output (up to 4G elements)
    compares in seconds instead of minutes on the host.
    """
    if len(actual) != len(expected):
        return Comparison(False, f"{len(actual)} outputs, expected {len(expected)}", 0.0, 0.0)
    max_abs = max_rel = 0.0
    for i, (e, a) in enumerate(zip(expected, actual, strict=True)):
        if type(a) is not torch.Tensor:
            return Comparison(False, f"output {i} is {type(a).__name__}", max_abs, max_rel)
        if a.shape != e.shape or a.dtype != e.dtype:
            why = f"output {i}: {a.dtype}{list(a.shape)}, expected {e.dtype}{list(e.shape)}"
            return Comparison(False, why, max_abs, max_rel)
        atol, rtol = config.tolerance(e.dtype)
        if not e.is_floating_point():
            if not torch.equal(a, e):
                return Comparison(
                    False, f"output {i}: values differ (exact dtype)", max_abs, max_rel
                )
            continue
        why, chunk_abs, chunk_rel = _compare_float(e, a, atol, rtol, device)
        max_abs, max_rel = max(max_abs, chunk_abs), max(max_rel, chunk_rel)
        if why:
            return Comparison(False, f"output {i}: {why}", max_abs, max_rel)
    return Comparison(True, "", max_abs, max_rel)


COMPARE_CHUNK = 1 << 22  # elements per step: fp64 temporaries stay ~32 MB whatever the output
CUDA_COMPARE_CHUNK = 1 << 25  # on a GPU: ~1.3 GB of fp64 temporaries, few host-device syncs


def _compare_float(e: torch.Tensor, a: torch.Tensor, atol: float, rtol: float, device: str):
    """(reason or None, max abs err, max rel err) over finite positions, in float64, chunked.

    Where every difference is finite and within tolerance (the common case) a chunk costs a few
    passes and no boolean-index copies: a 64M-element output took 3-5 s per trial
    in the unchunked version, which indexed by masks (benchmarks/results/judge_compare_cpu.json).
    """
    ef, af = e.reshape(-1), a.reshape(-1)
    max_abs = max_rel = 0.0
    step = COMPARE_CHUNK if device == "cpu" else CUDA_COMPARE_CHUNK
    for start in range(0, ef.numel(), step):
        ec = ef[start : start + step].to(device).double()
        ac = af[start : start + step].to(device).double()
        diff, ref = (ac - ec).abs(), ec.abs()
        within = bool((diff <= atol + rtol * ref).all())
        if not within:  # out of tolerance, or NaN/Inf somewhere: those must match exactly
            e_nan = ec.isnan()
            if not torch.equal(e_nan, ac.isnan()):
                return "NaN pattern differs", max_abs, max_rel
            inf = ec.isinf() | ac.isinf()
            if bool(inf.any()) and not torch.equal(ec[inf], ac[inf]):
                return "Inf pattern differs", max_abs, max_rel
            finite = ~(inf | e_nan)
            diff, ref = torch.where(finite, diff, 0.0), torch.where(finite, ref, 0.0)
            within = bool((diff <= atol + rtol * ref).all())
        max_abs = max(max_abs, diff.max().item())
        max_rel = max(max_rel, (diff / ref.clamp_min(1e-6)).max().item())
        if not within:
            return f"max_abs_err {max_abs:.3g} > tolerance ({atol:g}, {rtol:g})", max_abs, max_rel
    return None, max_abs, max_rel
