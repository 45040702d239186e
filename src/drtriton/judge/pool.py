"""Warm pools of sandboxes: ``verify``, ``verify_many`` and the optional Ray executor.

One sandbox (fork server) per worker slot: one per GPU on CUDA, a few on CPU. Pairs are judged
concurrently, at most one per slot, and results come back in input order.

    from drtriton.judge import JudgeConfig, verify_many
    verdicts = verify_many([(ref_src, cand_src), ...], JudgeConfig(device="cpu"), workers=2)
"""

from __future__ import annotations

import os
import queue
import shutil
import tempfile
import threading
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor

import torch

from drtriton.judge.config import JudgeConfig, default_scratch_root
from drtriton.judge.core import Slot, environment_record, judge_pair
from drtriton.judge.sandbox import Sandbox
from drtriton.judge.verdict import Verdict


class JudgePool:
    """A bounded pool of warm sandboxes. Use as a context manager; close() stops the servers."""

    def __init__(self, config: JudgeConfig, workers: int | None = None) -> None:
        self.config = config
        device = config.resolved_device()
        if device == "cuda" and not torch.cuda.is_available():
            raise ValueError("device cuda requested but no CUDA GPU is visible")
        root = config.scratch_dir or default_scratch_root()
        self._scratch = tempfile.mkdtemp(prefix="drtriton-judge-", dir=root)
        self._slots: queue.Queue[Slot] = queue.Queue()
        slots = [self._make_slot(i, device, workers) for i in range(_count(device, workers))]
        try:
            _start_all([s.sandbox for s in slots])
        except Exception:
            shutil.rmtree(self._scratch, ignore_errors=True)
            raise
        for slot in slots:
            self._slots.put(slot)
        self.size = len(slots)

    def _make_slot(self, i: int, device: str, workers: int | None) -> Slot:
        scratch = os.path.join(self._scratch, f"slot{i}")
        limit = int(self.config.memory_limit_gb * (1 << 30))
        cap = self.config.output_cap_bytes
        if device == "cpu":
            box = Sandbox("cpu", scratch, None, limit, cap)
            return Slot(box, "cpu", "cpu", environment_record(self.config, "cpu"))
        index = int(device.split(":")[1]) if ":" in device else i
        box = Sandbox("cuda", scratch, index, limit, cap)
        judge_device = f"cuda:{index}"
        # The child sees only this GPU (CUDA_VISIBLE_DEVICES), as its device 0.
        return Slot(box, judge_device, "cuda:0", environment_record(self.config, judge_device))

    def verify(self, reference_source: str, candidate_source: str) -> Verdict:
        slot = self._slots.get()
        try:
            return judge_pair(reference_source, candidate_source, self.config, slot)
        finally:
            self._slots.put(slot)

    def verify_many(
        self, pairs: Sequence[tuple[str, str]], progress: bool = False
    ) -> list[Verdict]:
        """Judge all pairs, ``self.size`` at a time; results in input order."""
        done = [0]
        lock = threading.Lock()

        def one(pair: tuple[str, str]) -> Verdict:
            verdict = self.verify(*pair)
            if progress:
                with lock:
                    done[0] += 1
                    print(f"[judge] {done[0]}/{len(pairs)} {verdict.status}", flush=True)
            return verdict

        with ThreadPoolExecutor(max_workers=self.size) as executor:
            return list(executor.map(one, pairs))

    def close(self) -> None:
        while not self._slots.empty():
            self._slots.get().sandbox.close()
        shutil.rmtree(self._scratch, ignore_errors=True)

    def __enter__(self) -> JudgePool:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _count(device: str, workers: int | None) -> int:
    if device.startswith("cuda:"):
        return 1
    if device == "cuda":
        gpus = torch.cuda.device_count()
        return min(workers, gpus) if workers else gpus
    return workers or max(1, min(4, os.cpu_count() or 1))


def _start_all(boxes: list[Sandbox]) -> None:
    # Fork servers import torch and triton: start them side by side.
    with ThreadPoolExecutor(max_workers=len(boxes)) as executor:
        list(executor.map(lambda b: b.start(), boxes))


def verify(reference_source: str, candidate_source: str, config: JudgeConfig) -> Verdict:
    """Judge one pair in a fresh single-slot pool (for many pairs use ``verify_many``)."""
    with JudgePool(config, workers=1) as pool:
        return pool.verify(reference_source, candidate_source)


def verify_many(
    pairs: Sequence[tuple[str, str]],
    config: JudgeConfig,
    workers: int | None = None,
    progress: bool = False,
    executor: str = "local",
) -> list[Verdict]:
    """Judge many pairs with a bounded pool (``executor="local"``) or Ray actors (``"ray"``)."""
    if executor == "ray":
        return _verify_with_ray(pairs, config, workers)
    if executor != "local":
        raise ValueError(f"unknown executor {executor!r}; use local or ray")
    with JudgePool(config, workers) as pool:
        return pool.verify_many(pairs, progress)


def _verify_with_ray(
    pairs: Sequence[tuple[str, str]], config: JudgeConfig, workers: int | None
) -> list[Verdict]:
    """One Ray actor per worker, each with a one-slot pool (one GPU each on CUDA clusters)."""
    import ray
    from ray.util import ActorPool

    if not ray.is_initialized():
        ray.init(include_dashboard=False, log_to_driver=False)
    on_gpu = config.device.startswith("cuda") or (
        config.device == "auto" and ray.cluster_resources().get("GPU", 0) > 0
    )
    n = workers or int(ray.cluster_resources().get("GPU" if on_gpu else "CPU", 1))
    actor_cls = ray.remote(num_gpus=1 if on_gpu else 0, num_cpus=1)(_RayJudge)
    actors = [actor_cls.remote(config) for _ in range(max(1, n))]
    results = ActorPool(actors).map(lambda a, p: a.verify.remote(p[0], p[1]), list(pairs))
    verdicts = [Verdict.from_dict(d) for d in results]
    for actor in actors:
        ray.kill(actor)
    return verdicts


class _RayJudge:
    """Ray actor body: a warm one-slot pool on whatever device Ray gave it."""

    def __init__(self, config: JudgeConfig) -> None:
        self.pool = JudgePool(config, workers=1)

    def verify(self, reference_source: str, candidate_source: str) -> dict:
        return self.pool.verify(reference_source, candidate_source).to_dict()
