"""The judge's output comparison on large outputs: chunked (current) vs the earlier mask-indexed.

    .venv/bin/python benchmarks/bench_judge_compare.py [--numel 67108864] [--repeats 3]

Both run side by side in this process on the same fp32 tensors (a candidate within tolerance of
the reference, so every element is checked). The earlier implementation is kept here, verbatim in
substance, as the baseline. Writes benchmarks/results/judge_compare_cpu.json; prints a table.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

import torch  # noqa: E402

from drtriton.bench import machine_record  # noqa: E402
from drtriton.judge import JudgeConfig, compare_outputs  # noqa: E402


def compare_masked(e: torch.Tensor, a: torch.Tensor, atol: float, rtol: float) -> bool:
    """The comparison as it was before chunking (whole-tensor fp64 copies, boolean indexing)."""
    e64, a64 = e.double(), a.double()
    if not torch.equal(e64.isnan(), a64.isnan()):
        return False
    inf = e64.isinf() | a64.isinf()
    if not torch.equal(e64[inf], a64[inf]):
        return False
    finite = ~(inf | e64.isnan())
    diff = (a64 - e64)[finite].abs()
    ref = e64[finite].abs()
    diff.max().item()
    (diff / ref.clamp_min(1e-6)).max().item()
    return bool((diff <= atol + rtol * ref).all())


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--numel", type=int, default=1 << 26)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument(
        "--out", type=Path, default=ROOT / "benchmarks" / "results" / "judge_compare_cpu.json"
    )
    args = p.parse_args()
    torch.manual_seed(0)
    expected = torch.randn(args.numel)
    actual = expected + 1e-3 * torch.randn(args.numel)
    config = JudgeConfig()
    atol, rtol = config.tolerance(torch.float32)
    times: dict[str, list[float]] = {"chunked": [], "masked": []}
    for _ in range(args.repeats):  # interleaved, so drift hits both alike
        t = time.perf_counter()
        assert compare_outputs((expected,), [actual], config).ok
        times["chunked"].append(time.perf_counter() - t)
        t = time.perf_counter()
        assert compare_masked(expected, actual, atol, rtol)
        times["masked"].append(time.perf_counter() - t)
    med = {k: statistics.median(v) for k, v in times.items()}
    result = {
        "machine": machine_record(ROOT),
        "numel": args.numel,
        "torch_threads": torch.get_num_threads(),
        "seconds": times,
        "median_s": med,
        "speedup": med["masked"] / med["chunked"],
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1))
    print(
        f"| numel | chunked s | masked s | speedup |\n|---|---|---|---|\n"
        f"| {args.numel} | {med['chunked']:.3f} | {med['masked']:.3f} | {result['speedup']:.2f}x |"
    )


if __name__ == "__main__":
    main()
