"""Convert-time tuning's compile-only pass leaves each autotuner timing as it did before."""

from __future__ import annotations

import triton
import triton.language as tl

from drtriton.compiler import tune


def _timed(kernel_call, quantiles=None) -> list[float]:
    return [1.0, 1.0, 1.0]


def _autotuned(do_bench=None):
    @triton.autotune(configs=[triton.Config({"B": 1}), triton.Config({"B": 2})], key=[],
                     do_bench=do_bench)
    @triton.jit
    def kernel(x_ptr, B: tl.constexpr):
        tl.store(x_ptr, B)

    return kernel


def test_compile_only_restores_a_benchmarker_read_inside_it():
    tuner = _autotuned(_timed)
    with tune._compile_only([tuner]):
        assert tuner.do_bench is tune._launch_once  # read here: a cached_property keeps it
    assert tuner.do_bench is _timed


def test_compile_only_leaves_no_benchmarker_of_its_own():
    tuner = _autotuned()
    with tune._compile_only([tuner]):
        assert tuner.do_bench is tune._launch_once
    assert "do_bench" not in tuner.__dict__
    assert tuner.__dict__.get("_do_bench") is None


def test_cached_choices_are_keyed_by_the_measuring_code():
    environment = tune.tuning_environment("cpu")
    key = tune.TuningCache.program_key("src", "fp32", environment)
    changed = {**environment, "tuner": "0" * 12}
    assert environment["tuner"] != changed["tuner"]
    assert tune.TuningCache.program_key("src", "fp32", changed) != key
