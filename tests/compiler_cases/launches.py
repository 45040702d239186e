"""The kernel launches in a compiled candidate's ``forward``, read from its source text."""

from __future__ import annotations

import re

# one line per launch: k3_conv[GRID](ARGS), GRID a literal tuple or a lambda over META
_LAUNCH = re.compile(r"^\s+(k\d+_\w+)\[(.*?)\]\((.*)\)\s*$", re.M)


def launches(source: str) -> list[tuple[str, str, str]]:
    """(kernel name, grid expression, call arguments) of every launch, in order."""
    return _LAUNCH.findall(source)
