"""Warm pools of sandboxes: ``verify``, ``verify_group``, ``verify_many`` and the Ray executor.

One slot per device (each GPU, or the CPU), each with several fork servers: children of one
slot start side by side (imports, Triton compilation and correctness trials use the host's
cores), while timing holds its GPU alone. Results come back in input order.

    from drtriton.judge import JudgeConfig, verify_group, verify_many
    verdicts = verify_group(ref_src, [cand1, cand2], JudgeConfig(device="cpu"))
    verdicts = verify_many([(ref_src, cand_src), ...], JudgeConfig(device="cpu"), workers=2)
"""

from __future__ import annotations

import dataclasses
import itertools
import os
import secrets
import shutil
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor

import torch

from drtriton.judge import isolation
from drtriton.judge.cache import BaselineCache, default_baseline_cache
from drtriton.judge.config import JudgeConfig, default_scratch_root
from drtriton.judge.kernel_store import KernelCompiler, KernelStore, default_kernel_store
from drtriton.judge.pair import Slot, environment_record, judge_pair, run_call
from drtriton.judge.sandbox import Sandbox
from drtriton.judge.verdict import Verdict
from drtriton.program import ProgramError
from drtriton.scratch import claim_scratch


class JudgePool:
    """Warm sandboxes on every slot. Use as a context manager; close() stops the servers.

    ``workers`` is, on the CPU, the number of children that may run at once; on CUDA, the
    number of GPUs used (default: all visible), each running up to ``config.jobs_per_gpu``
    children at once. Raises ``isolation.SandboxUnavailable`` when bubblewrap
    cannot run here and ``config.unsafe_no_sandbox`` is not set.
    """

    def __init__(self, config: JudgeConfig, workers: int | None = None) -> None:
        self.config = config
        device = config.resolved_device()
        if device.startswith("cuda") and not torch.cuda.is_available():
            raise ValueError("device cuda requested but no CUDA GPU is visible")
        self._bwrap = isolation.resolve(config.unsafe_no_sandbox)
        self._sandbox_text = isolation.describe(self._bwrap)
        root = config.scratch_dir or default_scratch_root()
        self._scratch = claim_scratch(root, "drtriton-judge-")  # and remove dead runs' ones
        baselines = None
        self.kernels: KernelCompiler | None = None
        if device != "cpu":
            baselines = BaselineCache(config.baseline_cache or default_baseline_cache())
            self.kernels = self._kernel_compiler()
        try:
            self.slots = _make_slots(self, device, workers, baselines)
            _start_all([box for slot in self.slots for box in slot.sandboxes])
        except BaseException:
            self.close()
            raise
        self.size = sum(len(slot.sandboxes) for slot in self.slots)
        self._next = itertools.count()

    def _sandbox(self, name: str, device: str, cuda_index: int | None, minor) -> Sandbox:
        scratch = os.path.join(self._scratch, name)
        limit = int(self.config.memory_limit_for(device) * (1 << 30))
        cap = self.config.output_cap_bytes
        store = (self.kernels.store.root,) if self.kernels else ()
        return Sandbox(device, scratch, cuda_index, limit, cap, bwrap=self._bwrap, gpu_minor=minor,
                       read_only_paths=store)

    def _kernel_compiler(self) -> KernelCompiler | None:
        """The kernel store and its compiler (CUDA only; never without the OS sandbox, where a
        child could write the store)."""
        root = self.config.kernel_store
        if root == "" or self._bwrap is None:
            return None
        store = KernelStore(root or default_kernel_store())
        box = Sandbox("cpu", os.path.join(self._scratch, "kernels"), bwrap=self._bwrap,
                      interpret=False)
        return KernelCompiler(store, box)

    def _slot(self, i: int) -> Slot:
        return self.slots[i % len(self.slots)]

    def verify(self, reference_source: str, candidate_source: str) -> Verdict:
        slot = self._slot(next(self._next))
        return judge_pair(reference_source, candidate_source, self.config, slot)

    def call(self, reference_source: str, function: str, arguments: dict, phase: str,
             gated: bool = False) -> dict:
        """Run project code over an untrusted reference in a sandbox (``pair.run_call``);
        ``gated``: code that times something, alone on its GPU when it asks (``gpu_gate``)."""
        slot = self._slot(next(self._next))
        with slot.sandbox() as box:
            return run_call(reference_source, function, arguments, self.config, slot, box, phase,
                            gated)

    def verify_group(
        self,
        reference_source: str,
        candidates: Sequence[str],
        progress: bool = False,
        seed: int | None = None,
    ) -> list[Verdict]:
        """Judge candidates of one reference on one slot, on one seed (``seed``, else
        ``config.seed``, else a fresh one): the reference runs once, the children start side by
        side, timing runs one candidate at a time. Results in input order."""
        slot = self._slot(next(self._next))
        seed = self._group_seed() if seed is None else seed
        report = _progress(len(candidates), progress)

        def one(candidate: str) -> Verdict:
            return report(judge_pair(reference_source, candidate, self.config, slot, seed))

        with ThreadPoolExecutor(max_workers=max(1, len(slot.sandboxes))) as executor:
            return list(executor.map(one, candidates))

    def _group_seed(self) -> int:
        """The one seed of a group's verdicts: ``config.seed``, else a fresh one."""
        return self.config.seed if self.config.seed is not None else secrets.randbits(31)

    def verify_groups(
        self, groups: Sequence[tuple[str, Sequence[str]]], progress: bool = False
    ) -> list[list[Verdict] | ProgramError]:
        """Judge several groups (a reference and its candidates) at once, ``self.size``
        children at a time: each group on one slot and one seed (``config.seed``, else a fresh
        one), so its reference runs once. A group whose reference cannot run gives its
        ``ProgramError`` in place of its verdicts. Results in input order."""
        jobs = []
        for g, (reference, candidates) in enumerate(groups):
            seed = self._group_seed()
            jobs += [(g, reference, c, self._slot(g), seed) for c in candidates]
        report = _progress(len(jobs), progress)

        def one(job) -> Verdict | ProgramError:
            g, reference, candidate, slot, seed = job
            try:
                return report(judge_pair(reference, candidate, self.config, slot, seed))
            except ProgramError as exc:
                return exc

        with ThreadPoolExecutor(max_workers=self.size) as executor:
            outcomes = list(executor.map(one, jobs))
        found: list[list[Verdict] | ProgramError] = [[] for _ in groups]
        for (g, *_), outcome in zip(jobs, outcomes, strict=True):
            if isinstance(outcome, ProgramError):
                found[g] = outcome
            elif not isinstance(found[g], ProgramError):
                found[g].append(outcome)
        return found

    def verify_many(
        self, pairs: Sequence[tuple[str, str]], progress: bool = False
    ) -> list[Verdict]:
        """Judge all pairs, ``self.size`` children at a time; results in input order."""
        report = _progress(len(pairs), progress)

        def one(indexed: tuple[int, tuple[str, str]]) -> Verdict:
            i, (reference, candidate) = indexed
            return report(judge_pair(reference, candidate, self.config, self._slot(i)))

        with ThreadPoolExecutor(max_workers=self.size) as executor:
            return list(executor.map(one, enumerate(pairs)))

    def close(self) -> None:
        if getattr(self, "kernels", None) is not None:
            self.kernels.close()
        for slot in getattr(self, "slots", []):
            for box in slot.sandboxes:
                box.close()
        shutil.rmtree(self._scratch, ignore_errors=True)

    def __enter__(self) -> JudgePool:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _progress(total: int, enabled: bool) -> Callable[[Verdict], Verdict]:
    done = [0]
    lock = threading.Lock()

    def report(verdict: Verdict) -> Verdict:
        if enabled:
            with lock:
                done[0] += 1
                print(f"[judge] {done[0]}/{total} {verdict.status}", flush=True)
        return verdict

    return report


def _make_slots(pool: JudgePool, device: str, workers: int | None, baselines) -> list[Slot]:
    config = pool.config
    if device == "cpu":
        n = workers or max(1, min(4, os.cpu_count() or 1))
        boxes = [pool._sandbox(f"cpu{j}", "cpu", None, None) for j in range(n)]
        return [Slot(boxes, "cpu", "cpu", environment_record(config, "cpu", pool._sandbox_text))]
    if ":" in device:
        indices = [int(device.split(":")[1])]
    else:
        gpus = torch.cuda.device_count()
        indices = list(range(min(workers, gpus) if workers else gpus))
    per_gpu = config.gpu_jobs(len(indices))
    slots = []
    for index in indices:
        minor = _gpu_minor(index)
        boxes = [pool._sandbox(f"gpu{index}-{j}", "cuda", index, minor) for j in range(per_gpu)]
        judge_device = f"cuda:{index}"
        env = environment_record(config, judge_device, pool._sandbox_text)
        # The children see only this GPU (CUDA_VISIBLE_DEVICES), as their device 0.
        slots.append(Slot(boxes, judge_device, "cuda:0", env, baselines=baselines,
                          kernels=pool.kernels))
    return slots


def _gpu_minor(index: int) -> int:
    props = torch.cuda.get_device_properties(index)
    try:
        return isolation.gpu_minor_for(props.pci_domain_id, props.pci_bus_id, props.pci_device_id)
    except AttributeError:  # an older torch without PCI ids: pass every GPU node through
        return -1


def _start_all(boxes: list[Sandbox]) -> None:
    # Fork servers import torch and triton: start them side by side.
    with ThreadPoolExecutor(max_workers=len(boxes)) as executor:
        list(executor.map(lambda b: b.start(), boxes))


def verify(reference_source: str, candidate_source: str, config: JudgeConfig) -> Verdict:
    """Judge one pair in a fresh single-slot pool (for many pairs use ``verify_many``)."""
    with JudgePool(dataclasses.replace(config, jobs_per_gpu=1), workers=1) as pool:
        return pool.verify(reference_source, candidate_source)


def verify_group(
    reference_source: str,
    candidates: Sequence[str],
    config: JudgeConfig,
    workers: int | None = None,
    progress: bool = False,
) -> list[Verdict]:
    """Judge several candidates of one reference (see ``JudgePool.verify_group``)."""
    with JudgePool(config, workers) as pool:
        return pool.verify_group(reference_source, candidates, progress)


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
