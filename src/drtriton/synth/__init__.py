"""CSP-DAG synthesis: valid, difficulty-controlled PyTorch programs from the operator catalogue.

A program of level L has exactly L operators. Level 1 sweeps the 61 catalogue operators, level 2
sweeps all 61*61 ordered pairs, higher levels draw operators uniformly and independently. Operators
are placed in order; each takes its inputs uniformly at random from the pool of tensors nothing has
consumed yet (fresh ``torch.randn`` inputs when the pool is short), and every tensor left unconsumed
is an output. The shapes are integer variables of one CP-SAT model (OR-Tools): operator shape rules,
per-tensor element bounds, a FLOP band (its lower end halved until feasible) and a memory cap. The
solver takes the first feasible solution of a fixed search that picks values at random
(``SELECT_RANDOM_HALF``), seeded from the program's seed, so different seeds give different shapes
and the same seed gives the same bytes.

Programs are then run (small scale, or any scale on a GPU) and kept only if their outputs are
finite, not constant and depend on every input; a rejected draw is replaced by the next attempt.

Layout: ``records`` (config, JSONL records), ``dag`` (operators, DAG, CP-SAT shapes, source),
``filters`` (the quality checks), ``driver`` (seeded draws, workers).

Run: ``drtriton synth --level 5 --num 100 --scale small --out programs.jsonl``.
"""

import importlib

# Names resolve on first use (PEP 562): ``dag``, ``driver`` and ``filters`` need OR-Tools, and
# reading stored programs (``records``) must not.
_HOMES = {"_Draft": "dag", "draw_program": "dag", "level_ops": "dag",
          "OPS_REDRAW_EVERY": "driver", "iter_synthesize": "driver", "program_rng": "driver",
          "synthesize": "driver", "synthesize_one": "driver", "check_program": "filters",
          **{n: "programs" for n in ("MAX_LEVEL", "SynthConfig", "SynthError", "SynthProgram",
                                    "SynthResult", "read_jsonl", "write_jsonl")}}

__all__ = sorted(_HOMES)


def __getattr__(name: str):
    if name not in _HOMES:
        raise AttributeError(f"module 'drtriton.synth' has no attribute {name!r}")
    return getattr(importlib.import_module(f"drtriton.synth.{_HOMES[name]}"), name)
