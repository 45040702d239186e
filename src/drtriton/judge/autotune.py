"""Autotuning in a candidate's correctness child: compile every config, time none.

Installed by the worker before the candidate is imported (CUDA only). These functions end up
on Triton's ``Autotuner`` class, where candidate code can reach them and their globals, so they
live here, apart from the worker's private namespace.
"""

from __future__ import annotations

INF = float("inf")

COMPILE_THREADS = 4  # configs of one autotuned kernel compiled side by side (1.5-2.3x on an H200)


def untimed_autotuning() -> None:
    """Autotuned kernels of a correctness child compile every config (side by side, on first
    use) and run the first that compiles, timing none: the GPU is shared with other children
    here, so timings would mislead, and the timing child tunes them anyway, alone on the GPU,
    with this child's binaries in its cache (its calls after timing check the config it chose).
    A config that cannot compile is ranked last, as the autotuner ranks it."""
    from concurrent.futures import ThreadPoolExecutor

    from triton.compiler.errors import CompileTimeAssertionFailure
    from triton.runtime.autotuner import Autotuner
    from triton.runtime.errors import OutOfResources, PTXASError

    unusable = (OutOfResources, CompileTimeAssertionFailure, PTXASError)  # as the autotuner's
    original_run = Autotuner.run

    def compile_config(self, args: tuple, meta: dict, config) -> bool:
        try:
            self.fn.run(*args, **dict(meta, **config.all_kwargs(), warmup=True))
        except unusable:
            return False
        return True

    def compile_only(self, *args, config, **meta):
        if not compile_config(self, args, meta, config):
            return [INF, INF, INF]
        rank = float(self.configs.index(config)) if config in self.configs else 0.0
        return [rank, rank, rank]

    def run(self, *args, **kwargs):
        if len(self.configs) > 1 and not getattr(self, "_drtriton_compiled", False):
            self._drtriton_compiled = True  # later keys compile one config after another
            self.nargs = dict(zip(self.arg_names, args, strict=False))
            configs = self.prune_configs(kwargs)
            with ThreadPoolExecutor(COMPILE_THREADS) as pool:
                list(pool.map(lambda c: compile_config(self, args, kwargs, c), configs))
        return original_run(self, *args, **kwargs)

    Autotuner._bench = compile_only
    Autotuner.run = run
