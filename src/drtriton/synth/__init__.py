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

Programs are then run (small scale, or any scale on a GPU) and kept only if their outputs are finite,
not constant and depend on every input; a rejected draw is replaced by the next attempt.

Layout: ``records`` (config, JSONL records), ``dag`` (operators, DAG, CP-SAT shapes, source),
``filters`` (the quality checks), ``driver`` (seeded draws, workers).

Run: ``drtriton synth --level 5 --num 100 --scale small --out programs.jsonl``.
"""

from drtriton.synth.dag import _Draft, draw_program, level_ops
from drtriton.synth.driver import (
    OPS_REDRAW_EVERY,
    iter_synthesize,
    program_rng,
    synthesize,
    synthesize_one,
)
from drtriton.synth.filters import check_program
from drtriton.synth.records import (
    MAX_LEVEL,
    SynthConfig,
    SynthError,
    SynthProgram,
    SynthResult,
    read_jsonl,
    write_jsonl,
)

__all__ = [
    "MAX_LEVEL", "OPS_REDRAW_EVERY", "SynthConfig", "SynthError", "SynthProgram", "SynthResult",
    "_Draft", "check_program", "draw_program", "iter_synthesize", "level_ops", "program_rng",
    "read_jsonl", "synthesize", "synthesize_one", "write_jsonl",
]
