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


def is_device_name(device: str, auto: bool = True) -> bool:
    """``cpu``, ``cuda``, ``cuda:N`` (and ``auto`` unless ``auto=False``): a name every layer
    accepts; whether a GPU is there is checked where it is used."""
    kind, colon, index = device.partition(":")
    if device in ("cpu", "cuda") or (auto and device == "auto"):
        return True
    return kind == "cuda" and bool(colon) and index.isdigit()
