"""Convert-time measurements kept across converts (``compiler.tune.TuningCache``): an unchanged
program converts again without timing anything, and a convert times only what it lacks."""

from __future__ import annotations

import os

os.environ.setdefault("TRITON_INTERPRET", "1")


from drtriton.compiler import CompilerConfig, compile_program, kernels, tune  # noqa: E402
from drtriton.compiler.capture import capture  # noqa: E402
from drtriton.compiler.convert import (  # noqa: E402
    Measurements,
    compile_in_child,
    compile_sandboxed,
    workers_per_compile,
)
from drtriton.compiler.lower import Lowering  # noqa: E402
from drtriton.compiler.tune import (  # noqa: E402
    TuningCache,
    measurement_key,
    tuning_environment,
)

LINEAR = '''
import torch
import torch.nn as nn

class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(64, 48)

    def forward(self, x):
        return torch.relu(self.fc(x))

def get_inputs():
    return [torch.randn(32, 64)]

def get_init_inputs():
    return []
'''


def _first_configs(source: str) -> dict:
    """A measurement as the GPU would report it: every autotuned kernel at its first config."""
    lowered = Lowering(capture(source), CompilerConfig(device="cuda")).run()
    choices = {k.name: 0 for k in lowered.kernels if k.configs}
    assert choices, "the program should have autotuned kernels"
    return {"device_name": "test GPU", "choices": choices}


def test_cache_keeps_measurements_per_program_and_environment(tmp_path):
    cache = TuningCache(tmp_path / "t.sqlite")
    env = {"device_name": "H200", "torch": "2.11", "triton": "3.6", "cuda": "13.0"}
    key = TuningCache.program_key(LINEAR, "fp32", env)
    assert key != TuningCache.program_key(LINEAR, "tf32", env)
    assert key != TuningCache.program_key(LINEAR, "fp32", env | {"triton": "3.7"})
    cache.store(key, {"tuning:abc": {"choices": {"k0": 2}}})
    again = TuningCache(tmp_path / "t.sqlite")
    assert again.load(key) == {"tuning:abc": {"choices": {"k0": 2}}}
    assert again.load(TuningCache.program_key(LINEAR, "tf32", env)) == {}


def test_a_hybrid_convert_finds_the_strict_compiles_tuning(tmp_path):
    """Both modes of one program share an entry: a hybrid convert on a GPU compiles strict
    too, and finds the tuning the strict convert measured (keyed by the strict candidate)."""
    cache = TuningCache(tmp_path / "t.sqlite")
    made = {"tuning:strict-candidate": {"choices": {"k0": 1}}}
    strict = _FakePool([{"candidate": "S", "measurements": made}])
    compile_sandboxed(strict, LINEAR, "strict", "cuda", tunings=cache)
    hybrid = _FakePool([{"candidate": "H", "measurements": {}}])
    compile_sandboxed(hybrid, LINEAR, "hybrid", "cuda", tunings=cache)
    (arguments, _), = hybrid.calls
    assert arguments["mode"] == "hybrid" and arguments["known"] == made


def test_measurements_use_what_is_known_and_keep_what_was_made():
    calls = []
    known = Measurements({"a": {"x": 1}})
    assert known.get("a", lambda: calls.append(1)) == {"x": 1}
    assert not calls and known.made == {}
    fresh = Measurements()
    assert fresh.get("b", lambda: {"y": 2}) == {"y": 2} and fresh.made == {"b": {"y": 2}}
    fresh.get("c", lambda: {"error": "out of memory"})
    assert "c" not in fresh.made  # a failure is retried by the next convert, not cached


def test_a_known_tuning_compiles_a_fixed_candidate_without_measuring(monkeypatch):
    monkeypatch.setattr(kernels.writer, "SMALL_WORK", 0)  # every kernel autotuned
    autotuned = compile_program(LINEAR, CompilerConfig(device="cuda"))
    assert "@triton.autotune(" in autotuned
    known = {measurement_key("tuning", autotuned): _first_configs(LINEAR)}

    def no_measuring(*args, **kwargs):
        raise AssertionError("measured a known tuning")

    monkeypatch.setattr(tune, "measure_choices", no_measuring)
    result = compile_in_child(LINEAR, "strict", "cuda", known=known)
    assert "@triton.autotune(" not in result["candidate"]
    assert "# tuned on test GPU over" in result["candidate"]
    assert result["measurements"] == {}
    # The compiler's output changed (another kernel text): the old measurement does not apply.
    other = {measurement_key("tuning", autotuned + "\n"): _first_configs(LINEAR)}
    again = compile_in_child(LINEAR, "strict", "cuda", known=other)
    assert "measured a known tuning" in again["tuning_error"]


class _FakePool:
    """Records how compile_sandboxed calls its children; answers like compile_in_child."""

    class config:  # noqa: N801 - stands in for JudgeConfig
        precision = "fp32"

    size = 4  # judge slots

    def __init__(self, answers: list[dict]) -> None:
        self.answers, self.calls = answers, []

    def call(self, source, function, arguments, phase, gated=False):
        self.calls.append((dict(arguments), gated))
        return self.answers.pop(0)


def test_convert_measures_once_then_reuses_the_measurements(tmp_path):
    cache = TuningCache(tmp_path / "t.sqlite")
    made = {"tuning:abc": {"device_name": "g", "choices": {"k0": 1}}}
    first = _FakePool([{"candidate": "A", "measurements": made}])
    assert compile_sandboxed(first, LINEAR, "strict", "cuda", tunings=cache)["candidate"] == "A"
    workers = workers_per_compile(_FakePool.size)  # the host's cores shared by the slots
    assert first.calls == [({"mode": "strict", "device": "cuda", "precision": "fp32",
                             "capture": "auto", "compile_workers": workers, "known": {}}, True)]
    second = _FakePool([{"candidate": "A", "measurements": {}}])
    result = compile_sandboxed(second, LINEAR, "strict", "cuda", tunings=cache)
    (arguments, gated), = second.calls
    assert gated and arguments["known"] == made
    assert result["tuning_cached"] is True
    third = _FakePool([{"candidate": "B", "measurements": {"tuning:def": {"choices": {}}}}])
    assert compile_sandboxed(third, LINEAR, "strict", "cuda", tunings=cache)["candidate"] == "B"
    program = TuningCache.program_key(LINEAR, "fp32", tuning_environment())
    assert set(cache.load(program)) == {"tuning:abc", "tuning:def"}
