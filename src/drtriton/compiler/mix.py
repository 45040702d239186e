"""Hybrid candidates that mix vendor and Triton products: which matrix products and convolutions
stay in Triton (``CompilerConfig.triton_products``), chosen by measuring on a GPU.

A hybrid compile sends every product to the vendor library and a strict one keeps them all in
Triton; ``compiler.convert`` times both and, where a program has products of more than one kind,
tries moving one kind at a time to the other side (``choose_mix``), keeping a move only when the
whole candidate gets faster. Products with one signature (the same library problem) move
together, those doing the most work first. The tuned configs of the hybrid and strict compiles
are reused for every kernel a mix shares with them (``reused_choices``), and such a kernel takes
its twin's name (``adopt_names``), so a trial compiles and tunes only the kernels neither compile
has.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

from drtriton.compiler.lower import Product

MAX_TRIALS = 4  # product groups tried per program (each a compile and a timing on the GPU)
MIN_GAIN = 0.02  # a move is kept only when the candidate gets at least this much faster


def product_groups(products: Sequence[Product]) -> list[tuple[int, ...]]:
    """Indices of the products that share a signature, the groups with the most flops first
    (ties in lowering order)."""
    groups: dict[str, list[int]] = {}
    for index, product in enumerate(products):
        groups.setdefault(product.signature, []).append(index)
    work = {sig: sum(products[i].flops for i in members) for sig, members in groups.items()}
    order = sorted(groups, key=lambda sig: -work[sig])  # stable: equal work keeps first-seen order
    return [tuple(groups[sig]) for sig in order]


def choose_mix(groups: Sequence[tuple[int, ...]], start: frozenset[int],
               time_pair: Callable[[frozenset[int], frozenset[int]], tuple[float, float]],
               max_trials: int = MAX_TRIALS,
               min_gain: float = MIN_GAIN) -> tuple[frozenset[int], list[dict]]:
    """Greedy: from ``start`` (the products kept in Triton by the faster of the hybrid and strict
    compiles), move each group to the other side in turn; ``time_pair(best, trial)`` returns
    both candidates' milliseconds measured side by side. Returns the kept set and the trials."""
    best, trials = start, []
    for group in groups[:max_trials]:
        trial = best ^ frozenset(group)
        best_ms, trial_ms = time_pair(best, trial)
        kept = trial_ms < best_ms * (1.0 - min_gain)
        trials.append({"triton_products": sorted(trial), "trial_ms": trial_ms,
                       "best_ms": best_ms, "kept": kept})
        if kept:
            best = trial
    return best, trials


_KERNEL = re.compile(r"^@triton\.(?:autotune|jit)\b.*?^def (\w+)\(.*?(?=^\S|\Z)", re.S | re.M)


def kernel_texts(candidate: str, autotuned_only: bool = False) -> dict[str, str]:
    """Each kernel of a candidate: name -> its text (decorators, signature, body) with the name
    replaced, so that the same kernel under another number compares equal."""
    return {m.group(1): m.group(0).replace(m.group(1), "KERNEL")
            for m in _KERNEL.finditer(candidate)
            if not autotuned_only or m.group(0).startswith("@triton.autotune")}


def autotuned_kernels(candidate: str) -> dict[str, str]:
    """``kernel_texts`` of the kernels that autotune."""
    return kernel_texts(candidate, autotuned_only=True)


def adopt_names(candidate: str, others: Sequence[str]) -> str:
    """``candidate`` with each kernel renamed as its twin (the same text) is named in
    ``others``: Triton caches compiled kernels by their source, name included, so a mix then
    compiles only the kernels that neither the hybrid nor the strict compile has."""
    twins: dict[str, str] = {}
    for other in others:
        for name, text in kernel_texts(other).items():
            twins.setdefault(text, name)
    mine = kernel_texts(candidate)
    names = {name: twins[text] for name, text in mine.items() if text in twins}
    taken = set(names.values())
    for name in mine:
        if name not in names:  # no twin: its own name, unless a twin took it
            new = name
            while new in taken:
                new += "_mix"
            names[name] = new
            taken.add(new)
    renamed = {old: new for old, new in names.items() if old != new}
    if not renamed:
        return candidate
    pattern = re.compile(r"\b(" + "|".join(map(re.escape, renamed)) + r")\b")
    return pattern.sub(lambda m: renamed[m.group(1)], candidate)


def reused_choices(candidate: str,
                   tuned: Sequence[tuple[str, dict[str, int]]]) -> dict[str, int] | None:
    """Configs for ``candidate``'s autotuned kernels taken from ``tuned`` (autotuned candidate
    texts with the config index each kernel chose), matching kernels by text; None when a
    kernel has no twin there (the mix must be tuned)."""
    known: dict[str, int] = {}
    for text, choices in tuned:
        for name, body in autotuned_kernels(text).items():
            if name in choices:
                known.setdefault(body, choices[name])
    chosen = {}
    for name, body in autotuned_kernels(candidate).items():
        if body not in known:
            return None
        chosen[name] = known[body]
    return chosen
