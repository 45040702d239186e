"""Repeated layers: a kernel the program already has (the same code at the same size) is
launched again under its name, so a model's repeated blocks compile and tune once. Checked
against PyTorch in the interpreter, and for the GPU emission's autotuned kernels on meta."""

from __future__ import annotations

import os
import re

os.environ.setdefault("TRITON_INTERPRET", "1")

from compiler_cases.harness import check  # noqa: E402
from drtriton.compiler import CompilerConfig, compile_program  # noqa: E402

PROGRAM = '''
import torch
import torch.nn as nn


class Block(nn.Module):
    def __init__(self, width):
        super().__init__()
        self.fc = nn.Linear(width, width)
        self.norm = nn.LayerNorm(width)

    def forward(self, x):
        return x + torch.relu(self.norm(self.fc(x)))


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.blocks = nn.Sequential(*[Block(WIDTH) for _ in range(3)])
        self.head = nn.Linear(WIDTH, 5)

    def forward(self, x):
        return self.head(self.blocks(x))


def get_inputs():
    return [torch.randn(4, WIDTH)]


def get_init_inputs():
    return []
'''


def _defined_and_launched(candidate: str) -> tuple[list[str], list[str]]:
    defined = re.findall(r"^def (k\d+\w*)\(", candidate, re.M)
    launched = re.findall(r"^\s+(k\d+\w*)\[", candidate, re.M)
    return defined, launched


def test_repeated_blocks_launch_one_kernel_per_distinct_code_and_match_pytorch():
    for mode in ("strict", "hybrid"):
        candidate = check(PROGRAM.replace("WIDTH", "16"), mode)
        defined, launched = _defined_and_launched(candidate)
        assert len(defined) == len(set(defined))
        assert set(launched) == set(defined)
        assert len(launched) >= 3 * len(defined) // 2, (mode, defined, launched)


def test_the_gpu_emission_tunes_each_repeated_kernel_once():
    source = PROGRAM.replace("WIDTH", "256")
    candidate = compile_program(source, CompilerConfig(mode="strict", device="cuda"))
    defined, launched = _defined_and_launched(candidate)
    assert candidate.count("@triton.autotune(") <= len(defined)
    assert len(launched) > len(defined)


def test_kernels_of_the_same_code_at_other_sizes_stay_apart():
    layers = "[Block(WIDTH), nn.Linear(WIDTH, 24), Block(24), nn.Linear(24, WIDTH)]"
    source = PROGRAM.replace("[Block(WIDTH) for _ in range(3)]", layers)
    candidate = check(source.replace("WIDTH", "16"), "strict")
    defined, launched = _defined_and_launched(candidate)
    assert len(set(launched)) == len(defined)
    assert len(launched) == len(defined)
