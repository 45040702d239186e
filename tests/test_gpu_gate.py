"""The GPU gate: timing never shares its GPU, and a gated job's untimed part does.

``GpuLock`` is a readers-writer lock (readers: untimed children, writer: a timing child) with an
upgrade for gated jobs; ``GpuHold`` answers a child's requests made through ``gpu_gate``."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from drtriton import gpu_gate
from drtriton.compiler import tune
from drtriton.judge.config import JudgeConfig
from drtriton.judge.pair import GpuHold, GpuLock, Slot, _gpu_out_of_memory, run_call
from drtriton.judge.sandbox import JobResult
from drtriton.judge.worker import REPORT


def _eventually(predicate, timeout_s: float = 5.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.005)
    return False


class _Watch:
    """Records, from inside the lock's holders, whether a writer ever overlapped anyone."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.readers = self.writers = 0
        self.overlap = False

    def enter(self, writer: bool) -> None:
        with self.lock:
            if writer:
                self.overlap |= self.readers > 0 or self.writers > 0
                self.writers += 1
            else:
                self.overlap |= self.writers > 0
                self.readers += 1

    def leave(self, writer: bool) -> None:
        with self.lock:
            if writer:
                self.writers -= 1
            else:
                self.readers -= 1


def test_an_upgrade_waits_for_other_readers_and_keeps_new_ones_out():
    lock, order = GpuLock(), []
    lock.acquire_shared()  # another child, still compiling
    lock.acquire_shared()  # the gated child

    def upgrade():
        lock.upgrade()
        order.append("exclusive")
        time.sleep(0.05)
        lock.release_exclusive()

    def late_reader():
        lock.acquire_shared()
        order.append("late reader")
        lock.release_shared()

    upgrader = threading.Thread(target=upgrade)
    upgrader.start()
    assert _eventually(lambda: lock._upgrading)
    reader = threading.Thread(target=late_reader)
    reader.start()
    time.sleep(0.05)
    assert order == []  # the other reader still holds the GPU; the late one waits its turn
    lock.release_shared()
    upgrader.join(5)
    reader.join(5)
    assert order == ["exclusive", "late reader"]


def test_concurrent_upgrades_and_writers_never_overlap_and_never_deadlock():
    lock, watch = GpuLock(), _Watch()

    def gated_job(k: int):
        lock.acquire_shared()
        watch.enter(False)
        time.sleep(0.001 * (k % 3))
        watch.leave(False)
        lock.upgrade()
        watch.enter(True)
        time.sleep(0.002)
        watch.leave(True)
        lock.downgrade()
        watch.enter(False)
        watch.leave(False)
        lock.release_shared()

    def timing_job():
        lock.acquire_exclusive()
        watch.enter(True)
        time.sleep(0.002)
        watch.leave(True)
        lock.release_exclusive()

    threads = [threading.Thread(target=gated_job if k % 2 else timing_job, args=(k,) * (k % 2))
               for k in range(24)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(20)
    assert not any(t.is_alive() for t in threads), "the lock deadlocked"
    assert not watch.overlap
    assert (lock._readers, lock._writer, lock._waiting_writers) == (0, False, 0)


def test_a_gated_hold_moves_to_exclusive_and_back_at_the_childs_requests(tmp_path, monkeypatch):
    lock = GpuLock()
    monkeypatch.setenv(gpu_gate.GATE_ENV, str(tmp_path))
    lock.acquire_shared()  # a neighbour, still compiling
    with GpuHold(lock, "shared", tmp_path):
        asked = threading.Thread(target=gpu_gate.gpu_alone)
        asked.start()
        time.sleep(0.05)
        assert asked.is_alive() and not lock._writer  # waits for the neighbour
        lock.release_shared()
        asked.join(5)
        assert not asked.is_alive() and lock._writer and lock._readers == 0
        gpu_gate.gpu_shared()
        assert not lock._writer and lock._readers == 1
    assert (lock._readers, lock._writer) == (0, False)


def test_a_compiler_child_holds_nothing_until_it_uses_the_gpu(tmp_path, monkeypatch):
    lock = GpuLock()
    monkeypatch.setenv(gpu_gate.GATE_ENV, str(tmp_path))
    with GpuHold(lock, "none", tmp_path):
        assert (lock._readers, lock._writer) == (0, False)  # capture and compiles: host only
        with lock.exclusive():  # so another child's timing is not held up meanwhile
            pass
        gpu_gate.gpu_shared()
        assert lock._readers == 1
        gpu_gate.gpu_alone()
        assert lock._writer and lock._readers == 0
        gpu_gate.gpu_unused()
        assert (lock._readers, lock._writer) == (0, False)
        gpu_gate.gpu_alone()  # from no hold straight to the GPU alone
        assert lock._writer
    assert (lock._readers, lock._writer) == (0, False)


def test_outside_a_gated_job_the_gate_does_nothing(tmp_path, monkeypatch):
    monkeypatch.delenv(gpu_gate.GATE_ENV, raising=False)
    gpu_gate.gpu_alone()
    gpu_gate.gpu_shared()
    lock = GpuLock()
    with GpuHold(lock):  # not gated: requests in a folder it does not watch are not answered
        assert lock._readers == 1
    assert lock._readers == 0


def test_the_compile_pass_launches_each_config_once_and_forgets_its_choice():
    launches = []

    class Tuner:
        def __init__(self) -> None:
            self._do_bench = "do_bench"
            self.cache = {}

    tuner = Tuner()
    with tune._compile_only([tuner]):
        assert tuner._do_bench(lambda: launches.append(1), quantiles=(0.5,)) == [0.0, 0.0, 0.0]
        tuner.cache[("key",)] = "first config"
    assert launches == [1]
    assert tuner._do_bench == "do_bench" and tuner.cache == {}


class _OutOfMemoryOnceBox:
    """A stand-in sandbox: its first child runs out of GPU memory, the next one succeeds. It
    records whether the GPU was held exclusively while each child ran."""

    def __init__(self, scratch, lock: GpuLock) -> None:
        self.scratch, self.lock, self.alone = str(scratch), lock, []

    def run(self, job_dir: str, timeout_s: float, cache: str) -> JobResult:
        self.alone.append(self.lock._writer)
        report = ({"status": "crashed", "reason": "memory limit exceeded in reference forward: "
                   "OutOfMemoryError: CUDA out of memory. Tried to allocate 7.53 GiB."}
                  if len(self.alone) == 1 else {"status": "ok", "result": 7})
        (Path(job_dir) / REPORT).write_text(repr(report))
        return JobResult(0, None, False, False, "", 0.1)


def test_a_reference_out_of_gpu_memory_while_sharing_runs_again_with_the_gpu_alone(tmp_path):
    slot = Slot([], judge_device="cpu", child_device="cuda", environment={})
    box = _OutOfMemoryOnceBox(tmp_path, slot.gpu)
    source = "import torch\nclass Model(torch.nn.Module):\n    pass\n"
    source += "def get_inputs():\n    return []\ndef get_init_inputs():\n    return []\n"
    result = run_call(source, "m:f", {}, JudgeConfig(), slot, box, "capture")
    assert result == 7
    assert box.alone == [False, True]


def test_a_child_out_of_gpu_memory_is_retried_only_on_a_gpu():
    crashed = {"status": "crashed", "reason": "OutOfMemoryError: CUDA out of memory."}
    on_gpu = Slot([], judge_device="cpu", child_device="cuda", environment={})
    on_cpu = Slot([], judge_device="cpu", child_device="cpu", environment={})
    assert _gpu_out_of_memory(crashed, on_gpu)
    assert not _gpu_out_of_memory(crashed, on_cpu)
    assert not _gpu_out_of_memory({"status": "crashed", "reason": "killed by signal 9"}, on_gpu)
    assert not _gpu_out_of_memory(None, on_gpu)


class _Box:
    """A stand-in sandbox whose children all report success; records whether each ran alone."""

    def __init__(self, scratch, lock: GpuLock) -> None:
        self.scratch, self.lock, self.alone = str(scratch), lock, []

    def run(self, job_dir: str, timeout_s: float, cache: str) -> JobResult:
        self.alone.append(self.lock._writer)
        (Path(job_dir) / REPORT).write_text(repr({"status": "ok", "result": 7}))
        return JobResult(0, None, False, False, "", 0.1)


def _failing_channels(monkeypatch, errors: list[str]) -> None:
    """Output channels whose receipt fails with ``errors`` in turn (then succeeds)."""
    import drtriton.judge.pair as pair

    class Channel:
        def __init__(self, job_dir, nonce, device) -> None:
            self.blob, self.error = None, errors.pop(0) if errors else ""

        def close(self) -> None:
            return None

    monkeypatch.setattr(pair, "OutputChannel", Channel)


SOURCE = ("import torch\nclass Model(torch.nn.Module):\n    pass\n"
          "def get_inputs():\n    return []\ndef get_init_inputs():\n    return []\n")


def test_a_judge_out_of_gpu_memory_taking_outputs_runs_the_child_again_alone(
        tmp_path, monkeypatch):
    _failing_channels(monkeypatch, ["OutOfMemoryError: CUDA out of memory. Tried to allocate"])
    slot = Slot([], judge_device="cpu", child_device="cuda", environment={})
    box = _Box(tmp_path, slot.gpu)
    assert run_call(SOURCE, "m:f", {}, JudgeConfig(), slot, box, "capture") == 7
    assert box.alone == [False, True]


def test_outputs_the_judge_could_not_take_are_named_in_the_verdict(tmp_path, monkeypatch):
    from drtriton.judge.pair import InvalidReferenceError

    _failing_channels(monkeypatch, ["ValueError: descriptor ended early"])
    slot = Slot([], judge_device="cpu", child_device="cpu", environment={})
    with pytest.raises(InvalidReferenceError, match="could not take its outputs: ValueError"):
        run_call(SOURCE, "m:f", {}, JudgeConfig(), slot, _Box(tmp_path, slot.gpu), "capture")


def test_outputs_the_child_cannot_send_are_in_its_report(tmp_path):
    """Exporting the outputs allocates a copy of them: on a full GPU that raises a CUDA error
    (not an OSError), which must reach the report instead of ending the child unreported."""
    import torch

    from drtriton.judge import worker

    results = worker._Results(str(tmp_path), {"outputs_nonce": "n", "device": "cpu"})
    results.add_outputs([torch.ones(3)])

    def full_gpu():
        raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 7.39 GiB")

    results.send_outputs = full_gpu
    results.finish(report := {"status": "ok"})
    written = (tmp_path / REPORT).read_text()
    assert "CUDA out of memory" in report["outputs_error"] and "outputs_error" in written
    on_gpu = Slot([], judge_device="cpu", child_device="cuda", environment={})
    assert _gpu_out_of_memory(report, on_gpu)  # so it runs again with the GPU alone
