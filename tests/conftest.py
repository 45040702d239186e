"""Test-suite setup: the Triton interpreter on CPU-only machines, and skipping ``gpu`` tests there.

TRITON_INTERPRET must be set before anything imports triton, so it is decided here from the
presence of an NVIDIA driver, not from torch.
"""

import os
import shutil

import pytest

HAS_NVIDIA = shutil.which("nvidia-smi") is not None
if not HAS_NVIDIA:
    os.environ.setdefault("TRITON_INTERPRET", "1")


def pytest_collection_modifyitems(config, items):
    import torch

    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)
