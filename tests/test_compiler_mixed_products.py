"""Hybrid candidates that keep some matrix products and convolutions in Triton and send the
others to the vendor library (``CompilerConfig.triton_products``)."""

from __future__ import annotations

import itertools
import os

os.environ.setdefault("TRITON_INTERPRET", "1")

import pytest  # noqa: E402
import torch  # noqa: E402

from compiler_cases.harness import run_pair  # noqa: E402
from drtriton.compiler import CompilerConfig, compile_with_products  # noqa: E402

SMALL = dict(n=4, cin=3, cout=8, hw=6, d=32)  # runs in the interpreter
LARGE = dict(n=64, cin=16, cout=32, hw=32, d=256)  # GPU-sized: every product autotunes

TEMPLATE = """
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d({cin}, {cout}, 3, padding=1)
        self.proj = nn.Linear({cout} * {hw} * {hw}, {d})
        self.head = nn.Linear({d}, {d})

    def forward(self, x, w):
        h = F.relu(self.conv(x)).flatten(1)
        h = F.gelu(self.proj(h))
        return self.head(h) + h @ w


def get_inputs():
    return [torch.randn({n}, {cin}, {hw}, {hw}), torch.randn({d}, {d})]


def get_init_inputs():
    return []
"""
BLOCK = TEMPLATE.format(**SMALL)

VENDOR_CALLS = ("torch.matmul(", "torch.nn.functional.conv2d(")


def _vendor_calls(candidate: str) -> int:
    forward = candidate.split("class ModelNew")[1]
    return sum(forward.count(call) for call in VENDOR_CALLS)


def _assert_matches(candidate: str) -> None:
    want, got = run_pair(BLOCK, candidate)
    for w, g in zip(want, got, strict=True):
        torch.testing.assert_close(g, w, atol=1e-4, rtol=1e-4)


def test_every_product_is_numbered_in_lowering_order_whatever_the_mode():
    _, strict = compile_with_products(BLOCK, CompilerConfig(mode="strict"))
    _, hybrid = compile_with_products(BLOCK, CompilerConfig(mode="hybrid"))
    assert strict == hybrid
    assert [p.signature.split()[0] for p in strict] == ["conv2d", "matmul", "matmul", "matmul"]
    # the head (its 32 x 32 weight read transposed) and h @ w are different library problems
    assert strict[2].signature != strict[3].signature
    assert "stride (1, 1) padding (1, 1)" in strict[0].signature
    assert [p.flops for p in strict] == [2 * 4 * 8 * 36 * 27, 2 * 4 * 288 * 32, 2 * 4 * 32 * 32,
                                         2 * 4 * 32 * 32]


@pytest.mark.parametrize("kept", [frozenset(c) for n in range(5)
                                  for c in itertools.combinations(range(4), n)])
def test_each_mix_of_vendor_and_triton_products_matches_pytorch(kept):
    candidate, products = compile_with_products(
        BLOCK, CompilerConfig(mode="hybrid", triton_products=kept))
    assert len(products) == 4
    if len(kept) == 4:  # nothing left to the vendor: the hybrid candidate is the strict one
        assert _vendor_calls(candidate) == 0
    else:
        assert _vendor_calls(candidate) == 4 - len(kept)
        assert "products kept in Triton" in candidate.splitlines()[0] or not kept
    _assert_matches(candidate)


def test_triton_products_is_refused_outside_hybrid_mode_and_for_bad_indices():
    with pytest.raises(ValueError, match="hybrid mode only"):
        CompilerConfig(mode="strict", triton_products=frozenset({0}))
    with pytest.raises(ValueError, match="indices >= 0"):
        CompilerConfig(mode="hybrid", triton_products=frozenset({-1}))


def test_product_groups_put_the_most_work_first_and_keep_twins_together():
    from drtriton.compiler import Product
    from drtriton.compiler.mix import product_groups

    products = [Product("a", 10.0), Product("b", 30.0), Product("a", 10.0), Product("c", 5.0)]
    assert product_groups(products) == [(1,), (0, 2), (3,)]


def test_choose_mix_keeps_a_move_only_when_it_is_faster_by_the_margin():
    from drtriton.compiler.mix import choose_mix

    cost = {0: (1.0, 3.0), 1: (2.0, 1.0), 2: (1.0, 1.01)}  # group: (vendor ms, Triton ms)

    def time_pair(best, trial):
        def ms(kept):
            return sum(t if g in kept else v for g, (v, t) in cost.items())
        return ms(best), ms(trial)

    kept, trials = choose_mix([(0,), (1,), (2,)], frozenset({0, 1, 2}), time_pair, min_gain=0.02)
    assert kept == frozenset({1, 2})  # 0 moves to the vendor; 2's 1% is noise, so it stays
    assert [t["kept"] for t in trials] == [True, False, False]
    kept, trials = choose_mix([(0,), (1,), (2,)], frozenset(), time_pair, max_trials=1)
    assert kept == frozenset() and len(trials) == 1


def _cuda(mode: str, kept: frozenset[int] = frozenset()) -> str:
    return compile_with_products(TEMPLATE.format(**LARGE), CompilerConfig(
        mode=mode, device="cuda", triton_products=kept))[0]


def test_a_mix_reuses_the_tuned_configs_of_the_kernels_it_shares():
    from drtriton.compiler.mix import autotuned_kernels, reused_choices

    tuned = []
    for mode in ("strict", "hybrid"):
        candidate = _cuda(mode)
        tuned.append((candidate, {n: i % 3 for i, n in enumerate(autotuned_kernels(candidate))}))
    assert len(tuned[0][1]) >= 4 and len(tuned[1][1]) >= 1
    by_text = {autotuned_kernels(c)[n]: i for c, choices in tuned for n, i in choices.items()}
    for kept in ({0}, {1}, {2, 3}, {1, 2, 3}, {0, 2, 3}):
        mix = _cuda("hybrid", frozenset(kept))
        chosen = reused_choices(mix, tuned)
        assert chosen is not None and set(chosen) == set(autotuned_kernels(mix)), kept
        assert all(by_text[autotuned_kernels(mix)[n]] == c for n, c in chosen.items())
    # the kernel reading the vendor convolution's output is the hybrid compile's alone
    assert reused_choices(_cuda("hybrid", frozenset({1, 2, 3})), tuned[:1]) is None


def test_a_hybrid_convert_on_a_gpu_keeps_the_mix_it_measures_fastest(monkeypatch):
    """The compile child's whole choice with the GPU's measurements faked by a cost model: the
    convolution is cheaper in the vendor library, the matrix products in Triton."""
    from drtriton.compiler import convert, tune
    from drtriton.compiler.mix import autotuned_kernels

    def fake_measure(candidate, source, device="cuda", compile_workers=1):
        return tune.Tuning("fake GPU", tuple((n, 0) for n in sorted(autotuned_kernels(candidate))))

    def ms(candidate):
        forward = candidate.split("class ModelNew")[1]
        conv, matmuls = forward.count("functional.conv2d("), forward.count("torch.matmul(")
        return conv * 1.0 + (1 - conv) * 3.0 + matmuls * 2.0 + (3 - matmuls) * 1.0

    monkeypatch.setattr(tune, "measure_choices", fake_measure)
    monkeypatch.setattr(tune, "time_candidates", lambda cs, *a, **k: [ms(c) for c in cs])
    result = convert.compile_in_child(TEMPLATE.format(**LARGE), "hybrid", "cuda")
    choice = result["hybrid_choice"]
    assert (choice["hybrid_ms"], choice["strict_ms"]) == (7.0, 6.0)
    assert choice["chose"] == "mixed" and choice["triton_products"] == [1, 2, 3]
    assert ms(result["candidate"]) == 4.0
    assert [t["kept"] for t in choice["mix_trials"]] == [False, True, False, False]
    assert "products kept in Triton: 1, 2, 3" in result["candidate"].splitlines()[0]
    assert not any(key.startswith("_") for key in result)


def test_a_benchmark_row_keeps_the_times_the_hybrid_choice_compared():
    from drtriton.policy import _choice_ms

    choice = {"chose": "mixed", "hybrid_ms": 7.0, "strict_ms": 6.0, "mix_trials": [
        {"trial_ms": 7.5, "kept": False}, {"trial_ms": 4.0, "kept": True},
        {"trial_ms": 5.0, "kept": False}]}
    assert _choice_ms(choice) == {"hybrid": 7.0, "strict": 6.0, "mixed": 4.0}
    assert _choice_ms({"chose": "hybrid"}) == {}


def test_a_mix_names_each_kernel_as_its_twin_and_still_matches_pytorch():
    """Triton caches compiled kernels by source, name included: a mix's kernel named as in the
    hybrid or strict compile is not compiled again."""
    from drtriton.compiler.mix import adopt_names, kernel_texts

    def cpu(mode, kept=frozenset()):
        return compile_with_products(BLOCK, CompilerConfig(mode=mode, triton_products=kept))[0]

    others = [cpu("hybrid"), cpu("strict")]
    twins = {text: name for other in reversed(others)
             for name, text in kernel_texts(other).items()}
    for kept in (frozenset({0}), frozenset({1, 2, 3}), frozenset({0, 2})):
        mix = adopt_names(cpu("hybrid", kept), others)
        texts = kernel_texts(mix)
        assert len(texts) == mix.count("@triton.jit")  # every kernel found, none lost
        assert all(twins[text] == name for name, text in texts.items() if text in twins)
        _assert_matches(mix)
    cuda_others = [_cuda("hybrid"), _cuda("strict")]
    cuda_mix = adopt_names(_cuda("hybrid", frozenset({1, 2, 3})), cuda_others)
    assert len(kernel_texts(cuda_mix)) == cuda_mix.count("@triton.jit")


def test_a_mix_that_fails_to_compile_loses_its_trial_not_the_compile(monkeypatch):
    from drtriton.compiler import convert, tune
    from drtriton.compiler.mix import autotuned_kernels

    def fake_measure(candidate, source, device="cuda", compile_workers=1):
        return tune.Tuning("fake GPU", tuple((n, 0) for n in sorted(autotuned_kernels(candidate))))

    real = convert._compiled

    def failing(source, config, *args, **kwargs):
        if config.triton_products:
            raise RuntimeError("boom")
        return real(source, config, *args, **kwargs)

    monkeypatch.setattr(tune, "measure_choices", fake_measure)
    monkeypatch.setattr(tune, "time_candidates", lambda cs, *a, **k: [float(len(c)) for c in cs])
    monkeypatch.setattr(convert, "_compiled", failing)
    result = convert.compile_in_child(TEMPLATE.format(**LARGE), "hybrid", "cuda")
    choice = result["hybrid_choice"]
    assert "error" not in result and choice["chose"] in ("hybrid", "strict")
    assert choice["mix_trials"] and not any(t["kept"] for t in choice["mix_trials"])


def test_moves_that_end_at_the_strict_compile_are_recorded_as_strict(monkeypatch):
    """Regression: a hybrid start whose every kind moved to Triton ended at the strict compile
    but was labelled a mix."""
    from drtriton.compiler import convert, tune
    from drtriton.compiler.mix import autotuned_kernels

    def fake_measure(candidate, source, device="cuda", compile_workers=1):
        return tune.Tuning("fake GPU", tuple((n, 0) for n in sorted(autotuned_kernels(candidate))))

    def ms(candidate):  # every vendor call costs 1 ms more than our kernel
        forward = candidate.split("class ModelNew")[1]
        return 4.0 + forward.count("functional.conv2d(") + forward.count("torch.matmul(")

    monkeypatch.setattr(tune, "measure_choices", fake_measure)
    monkeypatch.setattr(tune, "time_candidates", lambda cs, *a, **k: [ms(c) for c in cs])
    # a noisy first timing had the hybrid compile win, so the moves start from it
    monkeypatch.setattr(convert, "_faster_of", lambda s, h, st, *a, **k: h | {"hybrid_choice": {
        "hybrid_ms": 6.0, "strict_ms": 7.0, "chose": "hybrid"}})
    result = convert.compile_in_child(TEMPLATE.format(**LARGE), "hybrid", "cuda")
    choice = result["hybrid_choice"]
    assert [t["kept"] for t in choice["mix_trials"]] == [True, True, True, True]
    assert choice["chose"] == "strict" and "triton_products" not in choice
    assert "mode: strict" in result["candidate"].splitlines()[0]
