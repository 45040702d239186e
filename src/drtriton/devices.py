"""Device names, resolved one way for every layer: ``auto``, ``cpu``, ``cuda`` and ``cuda:N``."""

from __future__ import annotations


def resolve_device(device: str) -> str:
    """``auto`` becomes ``cuda`` when a GPU is visible, else ``cpu``; other names are kept."""
    if device != "auto":
        return device
    import torch  # imported here: a caller naming its device never pays for importing torch

    return "cuda" if torch.cuda.is_available() else "cpu"


def device_kind(device: str) -> str:
    """``cuda`` for ``cuda`` and ``cuda:N``, else ``cpu``: what the compiler targets there."""
    return "cuda" if device.startswith("cuda") else "cpu"
