"""The synthesis driver: per-index seeded draws until one passes the filters, in parallel
workers."""

from __future__ import annotations

import hashlib
import os
import random
from collections import Counter
from collections.abc import Callable, Iterator
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict

from drtriton.synth.dag import draw_program, level_ops
from drtriton.synth.filters import check_program
from drtriton.synth.programs import SynthConfig, SynthError, SynthProgram, SynthResult

OPS_REDRAW_EVERY = 10  # failed draws before a drawn level (>= 3) picks new operators


# ----------------------------------------------------------------------------- driver
def program_rng(config: SynthConfig, index: int, attempt: int) -> random.Random:
    """The seeded generator of one draw: a pure function of (seed, level, scale, index, attempt)."""
    return random.Random(
        f"drtriton-synth:{config.seed}:{config.level}:{config.scale}:{index}:{attempt}"
    )


def synthesize_one(config: SynthConfig, index: int) -> SynthResult:
    """Program ``index`` of the run: the first draw that solves and passes the filters."""
    rejected: Counter[str] = Counter()
    mode = config.check_mode()
    halvings = 0
    for attempt in range(config.max_attempts):
        if attempt % OPS_REDRAW_EVERY == 0:
            # Sweep levels keep their operators; drawn levels redraw them now and then, since
            # some sequences are degenerate whatever the shapes (LogSigmoid then ReLU is zero).
            op_names = level_ops(config.level, index, program_rng(config, index, -1 - attempt))
        rng = program_rng(config, index, attempt)
        # A sweep must reach every operator sequence, but some chains are degenerate whatever
        # the shapes (ReLU of LogSigmoid is zero): after the first redraw period, sweep levels
        # let operators take fresh inputs instead of their predecessors' outputs.
        fresh_rate = 0.5 if config.level <= 2 and attempt >= OPS_REDRAW_EVERY else 0.0
        draft = draw_program(op_names, config.scale, rng, config.budget(), halvings, fresh_rate)
        # A timeout usually means the FLOP floor is out of reach but not provably so: the next
        # draw starts one halving lower (the published generator's relaxation, made persistent).
        halvings += draft == "timeout"
        reason = draft if isinstance(draft, str) else check_program(draft, mode, config.device)
        if reason is None:
            program = SynthProgram(
                id=hashlib.sha256(draft.source.encode()).hexdigest()[:16],
                level=config.level,
                index=index,
                seed=config.seed,
                scale=config.scale,
                attempts=attempt + 1,
                checked=mode,
                **asdict(draft),
            )
            return SynthResult(program, dict(rejected))
        rejected[reason.split(": ", 1)[0]] += 1  # counted by kind (errors without their message)
    raise SynthError(
        f"program {index} ({', '.join(op_names)}): no valid draw in {config.max_attempts} "
        f"attempts; rejections: {dict(rejected)}"
    )


def _worker_init() -> None:
    import torch

    _die_with_parent()
    torch.set_num_threads(1)  # workers are the parallelism; intra-op threads would oversubscribe


def _die_with_parent() -> None:
    """Have the kernel kill this worker when the process that started it dies (Linux).

    A parent killed with SIGKILL cannot stop its pool: without this its workers, and the
    resource tracker they keep open, would outlive it. The signal is tied to the thread that
    started the worker, so ``iter_synthesize`` must be consumed in a long-lived thread (the
    main thread of the command)."""
    import ctypes
    import multiprocessing
    import signal
    import sys

    if not sys.platform.startswith("linux"):
        return
    pr_set_pdeathsig = 1
    ctypes.CDLL(None, use_errno=True).prctl(pr_set_pdeathsig, int(signal.SIGKILL), 0, 0, 0)
    parent = multiprocessing.parent_process()
    if parent is not None and os.getppid() != parent.pid:
        os._exit(1)  # the parent died before the signal was armed


def _one(args: tuple[SynthConfig, int]) -> SynthResult:
    return synthesize_one(*args)


def iter_synthesize(config: SynthConfig) -> Iterator[SynthResult]:
    """Yield the run's programs in index order (the same output whatever the worker count)."""
    config.validate()
    indices = range(config.start_index, config.start_index + config.num)
    if config.workers == 1:
        for i in indices:
            yield synthesize_one(config, i)
        return
    import multiprocessing

    ctx = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(config.workers, mp_context=ctx, initializer=_worker_init) as pool:
        yield from pool.map(_one, [(config, i) for i in indices], chunksize=4)


def synthesize(
    config: SynthConfig, on_result: Callable[[SynthResult], None] | None = None
) -> list[SynthProgram]:
    """Run a whole synthesis; ``on_result`` sees each result as it arrives (progress, saving)."""
    programs = []
    for result in iter_synthesize(config):
        if on_result is not None:
            on_result(result)
        programs.append(result.program)
    return programs
