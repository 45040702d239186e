"""Unit tests of the judge's trusted parts: config, verdicts, comparison, static checks."""

from __future__ import annotations

import math
import os
from pathlib import Path

import pytest
import torch

from drtriton.judge import JudgeConfig, Verdict, compare_outputs
from drtriton.judge.pair import run_reference
from drtriton.judge.static import check_source
from drtriton.program import ProgramError

CASES = Path(__file__).parent / "judge_cases"


def test_config_validates_and_resolves():
    assert JudgeConfig().preset == "hardened"
    assert JudgeConfig(preset="kernelbench").tolerance(torch.float32) == (1e-4, 1e-4)
    assert JudgeConfig(preset="kernelbench-v0.1").tolerance(torch.float32) == (1e-2, 1e-2)
    assert JudgeConfig().tolerance(torch.int64) == (0.0, 0.0)
    assert JudgeConfig().precision == "fp32"
    assert JudgeConfig(preset="kernelbench-v0.1").precision == "tf32"
    assert JudgeConfig(tf32=True).allows_tf32
    assert JudgeConfig(device="cpu").resolved_device() == "cpu"
    for bad in ({"preset": "x"}, {"mode": "lax"}, {"trials": 1}, {"device": "tpu"}):
        with pytest.raises(ValueError):
            JudgeConfig(**bad)


def test_verdict_round_trip_and_status_check():
    v = Verdict("incorrect", "trial 1: off", max_abs_err=0.5, max_rel_err=2.0, environment={"a": 1})
    assert Verdict.from_dict(v.to_dict()) == v
    assert not v.ok and "incorrect" in v.summary()
    with pytest.raises(ValueError):
        Verdict("fine")


def _cmp(expected, actual, preset="hardened"):
    return compare_outputs((expected,), [actual], JudgeConfig(preset=preset))


def test_compare_tolerance_table():
    e = torch.ones(10)
    assert _cmp(e, e + 5e-3).ok
    assert not _cmp(e, e + 5e-3, preset="kernelbench").ok
    bad = _cmp(e, e + 0.5)
    assert not bad.ok and math.isclose(bad.max_abs_err, 0.5, rel_tol=1e-6)


def test_compare_shape_dtype_nan_inf_exact():
    e = torch.tensor([1.0, float("nan"), float("inf")])
    assert _cmp(e, e.clone()).ok
    assert "NaN" in _cmp(e, torch.tensor([1.0, 0.0, float("inf")])).reason
    assert "Inf" in _cmp(e, torch.tensor([1.0, float("nan"), -float("inf")])).reason
    assert "expected" in _cmp(torch.ones(3), torch.ones(4)).reason
    assert not _cmp(torch.ones(3), torch.ones(3, dtype=torch.float64)).ok
    assert not _cmp(torch.arange(3), torch.arange(3) + 1).ok
    assert not compare_outputs((e, e), [e], JudgeConfig()).ok


def test_integer_mismatch_reports_its_exact_difference_and_count():
    """16777217 and 16777216 are equal in float32: the report says 1, not ``max abs err 0``."""
    e = torch.tensor([[16777217, 1, 5]])
    bad = _cmp(e, torch.tensor([[16777216, 1, 5]]))
    assert not bad.ok and bad.max_abs_err == 1.0
    assert "1 of 3 elements" in bad.reason and "max abs diff 1" in bad.reason
    flags = _cmp(torch.tensor([True, False]), torch.tensor([False, False]))
    assert not flags.ok and "1 of 2" in flags.reason


def test_compare_is_chunked_and_still_sees_every_element(monkeypatch):
    import drtriton.judge.compare as compare

    monkeypatch.setattr(compare, "COMPARE_CHUNK", 4)
    e = torch.arange(10, dtype=torch.float32).reshape(2, 5)
    far = e.clone()
    far[1, 4] += 0.5  # in the last, short chunk
    bad = _cmp(e, far)
    assert not bad.ok and math.isclose(bad.max_abs_err, 0.5, rel_tol=1e-6)
    near = e.clone()
    near[0, 0] += 4e-3  # the largest error is in the first chunk, the rest is exact
    ok = _cmp(e, near)
    assert ok.ok and math.isclose(ok.max_abs_err, 4e-3, rel_tol=1e-3)
    nan = e.clone()
    nan[1, 3] = float("nan")
    assert "NaN" in _cmp(e, nan).reason


@pytest.mark.parametrize(
    "source, expected",
    [
        ("class ModelNew(Model):\n    pass\n", "subclasses"),
        ("from reference import Model\n", "imports the reference"),
        ("import torch\nf = torch.compile(lambda x: x)\n", "torch.compile"),
        ("try:\n    k()\nexcept Exception:\n    torch.relu(x)\n", "falls back"),
        ("def f(:\n", "syntax error"),
    ],
)
def test_static_checks_flag(source, expected):
    finding = check_source(source)
    assert finding is not None and expected in finding.reason


def test_static_checks_pass_legit_and_hybrid_try():
    assert check_source((CASES / "legit_linear.py").read_text()) is None
    assert check_source("try:\n    k()\nexcept Exception:\n    torch.relu(x)\n", "hybrid") is None


@pytest.fixture(scope="module")
def cpu_slot():
    from drtriton.judge import JudgePool

    with JudgePool(JudgeConfig(device="cpu", reference_timeout_s=20.0), workers=1) as pool:
        yield pool.slots[0]


def _reference(slot, source, seeds, model_seed, **config):

    with slot.sandbox() as box:
        return run_reference(source, JudgeConfig(device="cpu", **config), slot, seeds,
                             model_seed, box)


def test_reference_runs_with_matching_seeds(cpu_slot):
    src = (CASES / "ref_linear.py").read_text()
    a = _reference(cpu_slot, src, [1, 2], 7)
    b = _reference(cpu_slot, src, [1, 2], 7)
    c = _reference(cpu_slot, src, [1, 3], 7)
    assert torch.equal(a.outputs[1][0], b.outputs[1][0])
    assert not torch.equal(a.outputs[1][0], c.outputs[1][0])
    assert torch.equal(a.outputs[0][0], c.outputs[0][0])
    assert a.fingerprints == b.fingerprints != c.fingerprints


def test_invalid_reference_raises_program_error(cpu_slot):
    with pytest.raises(ProgramError, match="missing Model"):
        _reference(cpu_slot, "x = 1\n", [1], 0)
    broken = ("import torch\nclass Model(torch.nn.Module):\n"
              "    def forward(self, x):\n        return x.nope()\n")
    broken += (
        "def get_inputs():\n    return [torch.ones(2)]\ndef get_init_inputs():\n    return []\n"
    )
    with pytest.raises(ValueError, match="reference forward .trial 0.: AttributeError"):
        _reference(cpu_slot, broken, [1], 0)


_SLEEPING_INPUTS = """
import time
import torch


class Model(torch.nn.Module):
    def forward(self, x):
        return x + 1


def get_inputs():
    time.sleep(3600)
    return [torch.ones(4)]


def get_init_inputs():
    return []
"""


def test_a_hanging_reference_is_bounded_and_named(cpu_slot):
    # Regression: a reference whose get_inputs slept for an hour hung verify and convert;
    # --timeout-s bounded only the candidate. The reference runs in a child with its own limit.
    import time

    t0 = time.monotonic()
    with pytest.raises(ProgramError, match=r"exceeded the 2 s .* in reference get_inputs"):
        _reference(cpu_slot, _SLEEPING_INPUTS, [1], 0, reference_timeout_s=2.0)
    assert time.monotonic() - t0 < 30
    ok = _reference(cpu_slot, (CASES / "ref_add_relu.py").read_text(), [1], 0)  # pool survives
    assert ok.outputs[0][0].shape == (1000,)


def test_scratch_goes_where_configured_and_shm_only_when_roomy(tmp_path, monkeypatch):
    import os
    from types import SimpleNamespace

    from drtriton.judge import JudgePool
    from drtriton.judge import config as judge_config

    with JudgePool(JudgeConfig(device="cpu", scratch_dir=str(tmp_path)), workers=1) as pool:
        assert pool._scratch.startswith(str(tmp_path))
    small = SimpleNamespace(f_bavail=1, f_frsize=2**30)  # 1 GiB free
    monkeypatch.setattr(os, "statvfs", lambda path: small)
    assert judge_config.default_scratch_root() is None
    roomy = SimpleNamespace(f_bavail=64, f_frsize=2**30)
    monkeypatch.setattr(os, "statvfs", lambda path: roomy)
    assert judge_config.default_scratch_root() == "/dev/shm"


@pytest.mark.gpu
def test_compare_on_the_gpu_matches_the_host():
    e = torch.randn(3000, 7)
    a = e + 1e-3 * torch.randn_like(e)
    a[5, 3] = e[5, 3] + 0.5
    host = compare_outputs((e,), [a], JudgeConfig())
    device = compare_outputs((e,), [a], JudgeConfig(), "cuda")
    assert not host.ok and not device.ok and host.reason == device.reason
    assert math.isclose(host.max_abs_err, device.max_abs_err, rel_tol=1e-12)


def test_compile_baseline_compiles_inside_the_sandbox_environment():
    # Regression: the sandbox's TORCHDYNAMO_DISABLE=1 (meant for candidates) also turned the
    # reference's torch.compile baseline into eager PyTorch; torch reads the variable at every
    # torch.compile call, so config.disable = False was not enough.
    import subprocess
    import sys

    code = (
        "import torch\n"
        "from drtriton.judge.worker import compile_baseline\n"
        "m = compile_baseline(torch.nn.GELU(), [torch.randn(8)], backend='eager')\n"
        "print(torch.allclose(m(torch.ones(3)), torch.nn.GELU()(torch.ones(3))))\n"
    )
    env = dict(os.environ, TORCHDYNAMO_DISABLE="1")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                         timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip().endswith("True")


def test_timing_plan_fits_calls_to_a_time_budget():
    from drtriton.judge.worker import timing_plan

    # (first call ms, warm-up s, budget s, max calls) -> (warm-up calls, timed calls)
    assert timing_plan(0.01, 0.1, 1.0, 100) == (100, 100)  # fast: capped at max calls
    assert timing_plan(45.0, 0.1, 1.0, 100) == (2, 22)  # a 45 ms program: about 1 s of calls
    assert timing_plan(5.0, 0.1, 1.0, 100) == (20, 100)
    # seconds per call (an eager one-row LayerNorm over 983M elements): the floor of 2 + 10
    assert timing_plan(5000.0, 0.1, 1.0, 100) == (2, 10)


def test_baseline_cache_round_trip_and_key(tmp_path):
    from drtriton.judge.cache import BaselineCache

    cache = BaselineCache(tmp_path / "b.sqlite")
    env = {"device_name": "H200", "torch": "2.11", "triton": "3.6", "precision": "fp32"}
    key = cache.key("src", env, {"budget_s": 1.0})
    assert cache.load(key) is None
    cache.store(key, {"eager": {"median_ms": 2.0}, "compile": {"median_ms": 1.5}})
    again = BaselineCache(tmp_path / "b.sqlite").load(key)
    assert again["eager"]["median_ms"] == 2.0 and again["measured"].endswith("Z")
    # another source, GPU, version, precision or timing setting is another measurement
    for other in (cache.key("src2", env, {"budget_s": 1.0}),
                  cache.key("src", {**env, "torch": "2.12"}, {"budget_s": 1.0}),
                  cache.key("src", {**env, "precision": "tf32"}, {"budget_s": 1.0}),
                  cache.key("src", env, {"budget_s": 2.0})):
        assert other != key and cache.load(other) is None


def test_reference_cache_computes_each_key_once():
    import threading

    from drtriton.judge.cache import ReferenceCache

    calls = []
    cache = ReferenceCache(capacity=2)

    def compute():
        calls.append(1)
        return len(calls)

    results = []
    threads = [threading.Thread(target=lambda: results.append(cache.get(("k",), compute)))
               for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(calls) == 1 and sorted(hit for _, hit in results) == [False] + [True] * 7
    cache.get(("a",), compute), cache.get(("b",), compute)  # evicts ("k",)
    assert cache.get(("k",), compute) == (4, False)


def test_reference_cache_runs_a_failing_reference_once_per_key():
    """A group's candidates each asked for the reference, so an invalid one ran once per
    candidate; its error is now remembered and raised to the later callers."""
    from drtriton.judge.cache import ReferenceCache
    from drtriton.judge.pair import InvalidReferenceError

    calls = []
    cache = ReferenceCache(remembered=(InvalidReferenceError,), small_capacity=2)

    def fail():
        calls.append(1)
        raise InvalidReferenceError("reference: forward raised")

    for _ in range(3):
        with pytest.raises(InvalidReferenceError, match="forward raised"):
            cache.get(("bad",), fail)
    assert len(calls) == 1
    with pytest.raises(ZeroDivisionError):  # not remembered: computed again next time
        cache.get(("other",), lambda: 1 / 0)
    assert cache.get(("other",), lambda: 5) == (5, False)
    for key in ("x", "y"):  # the two most recent failures are kept
        with pytest.raises(InvalidReferenceError):
            cache.get((key,), fail)
    with pytest.raises(InvalidReferenceError):
        cache.get(("bad",), fail)
    assert len(calls) == 4  # ("bad",) was forgotten and ran again


_ESCAPING_REFERENCE = """
import subprocess
import sys

import torch


class Model(torch.nn.Module):
    def forward(self, x):
        return x + 1


def get_inputs():
    return [torch.ones(4)]


def get_init_inputs():
    subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30.75)"],
                     start_new_session=True)
    with open("/tmp/drtriton-reference-escape", "w") as f:
        f.write("escaped")
    return []
"""


def test_a_users_reference_is_sandboxed_too(cpu_slot):
    # The reference child is not sealed (it runs the user's own problem), but it runs inside
    # the sandbox: what it writes stays in a private /tmp, what it starts dies with the job.
    ref = _reference(cpu_slot, _ESCAPING_REFERENCE, [1], 0)
    assert torch.equal(ref.outputs[0][0], torch.full((4,), 2.0))
    assert not os.path.exists("/tmp/drtriton-reference-escape")
    for pid in os.listdir("/proc"):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                assert b"time.sleep(30.75)" not in f.read()
        except OSError:
            pass


@pytest.mark.parametrize(
    ("source", "phase"),
    [
        ("raise RuntimeError('at import')\n", "reference import: RuntimeError: at import"),
        ("def get_init_inputs():\n    raise KeyError('init')\n",
         "reference get_init_inputs"),
    ],
)
def test_reference_failures_name_their_phase(cpu_slot, source, phase):
    base = (CASES / "ref_add_relu.py").read_text()
    with pytest.raises(ProgramError, match=phase.replace("(", r"\(")):
        _reference(cpu_slot, base + "\n" + source, [1], 0)


def test_code_under_a_private_directory_is_bound_back(tmp_path):
    # Regression: a clone and its venv under /tmp (a CI checkout) were hidden by the sandbox's
    # fresh /tmp, and every fork server failed to start.
    from drtriton.judge.isolation import visible_again

    repo = tmp_path / "clone"
    (repo / "src").mkdir(parents=True)
    (repo / ".venv" / "lib").mkdir(parents=True)
    found = visible_again([str(repo / "src"), str(repo), str(repo / ".venv" / "lib"), "/usr"])
    assert str(tmp_path).startswith("/tmp")  # pytest's tmp_path is where the bug showed
    assert found == [os.path.realpath(repo)]  # nested paths collapse into the clone
    assert visible_again(["/usr", "/nonexistent/tmp"]) == []


def test_reports_with_non_finite_numbers_still_parse(tmp_path):
    from drtriton.judge.pair import read_report
    from drtriton.judge.worker import REPORT, _literal

    report = {"status": "ok", "t": [float("nan"), 1.5, float("-inf")], "n": {"x": float("inf")}}
    (tmp_path / REPORT).write_text(repr(_literal(report)))
    back = read_report(tmp_path)
    assert back == {"status": "ok", "t": ["nan", 1.5, "-inf"], "n": {"x": "inf"}}


def test_report_lines_are_the_one_way_commands_print_a_verdict():
    from drtriton.judge import Verdict

    timed = Verdict("correct", max_abs_err=0.0, runtime_ms=1.0, eager_ms=2.0,
                    speedup_eager=2.0, speedup_compile=1.5)
    assert timed.report_lines() == [
        "verdict: correct (max abs err 0)",
        "speedup: 2.00x vs eager, 1.50x vs torch.compile (1.000 ms vs 2.000 ms)",
    ]
    assert Verdict("incorrect", "trial 0: [x] differs").report_lines() == [
        "verdict: incorrect - trial 0: [x] differs"]
