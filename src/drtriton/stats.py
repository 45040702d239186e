"""Summary statistics shared by the benchmark and training reports."""

from __future__ import annotations

import math
from collections.abc import Iterable


def geomean(values: Iterable[float]) -> float | None:
    """The geometric mean of positive ``values``; None when there are none."""
    logs = [math.log(v) for v in values]
    return math.exp(sum(logs) / len(logs)) if logs else None
