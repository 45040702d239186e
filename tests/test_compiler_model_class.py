"""What ModelNew keeps of the reference's class: its attributes, the methods its constructor
calls, and the mode (training or eval) its forward was compiled for."""

from __future__ import annotations

import os

os.environ.setdefault("TRITON_INTERPRET", "1")

import types  # noqa: E402
from pathlib import Path  # noqa: E402

import pytest  # noqa: E402
import torch  # noqa: E402

from compiler_cases.harness import check  # noqa: E402
from drtriton.compiler import CompilerConfig, compile_program  # noqa: E402

CLASS_ATTRIBUTES = '''
import torch
import torch.nn as nn


class Model(nn.Module):
    expansion = 4
    groups: int = 2

    def __init__(self, c):
        super().__init__()
        self.body = self._make(c)
        self.scale = self.expansion * 0.25

    def _make(self, c):
        return nn.Sequential(self._conv(c), nn.ReLU())

    def _conv(self, c):
        return nn.Conv2d(c, c * self.expansion // 4, 3, padding=1, groups=self.groups)

    def not_called_by_the_constructor(self):
        import numpy
        return numpy.zeros(1)

    def forward(self, x):
        return self.body(x) * self.scale * self.expansion


def get_inputs():
    return [torch.randn(1, 4, 5, 5)]


def get_init_inputs():
    return [4]
'''

BATCH_NORM = '''
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, c, inference):
        super().__init__()
        self.conv = nn.Conv2d(c, c, 3, padding=1)
        self.bn = nn.BatchNorm2d(c)
        self.drop = nn.Dropout(0.2)
        with torch.no_grad():
            self.bn.running_mean.uniform_(-1, 1)
            self.bn.running_var.uniform_(0.5, 2)
        if inference:
            self.eval()

    def forward(self, x):
        return self.drop(torch.relu(self.bn(self.conv(x))))


def get_inputs():
    return [torch.randn(2, 3, 6, 6)]


def get_init_inputs():
    return [3, INFERENCE]
'''

NO_MODE = '''
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 4)

    def forward(self, x):
        return torch.relu(self.fc(x))


def get_inputs():
    return [torch.randn(3, 8)]


def get_init_inputs():
    return []
'''


def _model_new(candidate: str, *init):
    module = types.ModuleType("candidate")
    exec(compile(candidate, "<candidate>", "exec"), module.__dict__)
    return module.ModelNew(*init)


@pytest.mark.parametrize("mode", ["strict", "hybrid"])
def test_class_attributes_and_constructor_helpers_are_kept(mode):
    candidate = check(CLASS_ATTRIBUTES, mode)
    assert "not_called_by_the_constructor" not in candidate  # forward is compiled, not copied


@pytest.mark.parametrize("mode", ["strict", "hybrid"])
def test_a_model_built_in_eval_mode_compiles_for_eval_mode(mode):
    source = BATCH_NORM.replace("INFERENCE", "True")
    candidate = check(source, mode)  # running statistics, no dropout: PyTorch's eval forward
    model = _model_new(candidate, 3, True)
    with pytest.raises(RuntimeError, match="compiled with Model in eval mode"):
        model.train()(torch.randn(2, 3, 6, 6))


def test_a_forward_compiled_in_training_mode_refuses_eval_mode():
    source = BATCH_NORM.replace("INFERENCE", "False").replace("nn.Dropout(0.2)", "nn.Identity()")
    candidate = check(source, "strict")  # batch statistics, as PyTorch trains
    model = _model_new(candidate, 3, False)
    with pytest.raises(RuntimeError, match="training mode.*ends with self.eval"):
        model.eval()(torch.randn(2, 3, 6, 6))


def test_a_forward_the_same_in_both_modes_runs_in_both():
    candidate = compile_program(NO_MODE, CompilerConfig(device="cpu"))
    assert "self.training" not in candidate
    model = _model_new(candidate).eval()
    with torch.no_grad():
        assert model(torch.randn(3, 8)).shape == (3, 4)


MODULE_CONSTANTS = '''
import torch
import torch.nn as nn

DIM = 8
HIDDEN = 2 * DIM
DTYPE = torch.float16
SHAPE = (DIM, -HIDDEN)


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(DIM, HIDDEN)
        self.width = -SHAPE[1]
        self.to(DTYPE)

    def forward(self, x):
        return torch.relu(self.fc(x)) * self.width


def get_inputs():
    return [torch.randn(3, DIM, dtype=torch.float16)]


def get_init_inputs():
    return []
'''


def test_module_constants_the_constructor_reads_are_kept():
    """A dtype (``DTYPE = torch.float16``) or arithmetic of other constants at module level,
    read by ``__init__``: ModelNew is built by the same code, so it needs them too."""
    candidate = check(MODULE_CONSTANTS, atol=1e-2, rtol=1e-2)
    assert "DTYPE = torch.float16" in candidate and "HIDDEN = 2 * DIM" in candidate


def test_a_constant_reading_a_tuple_assigned_name_is_not_copied():
    """``bias_shape = (out_channels, 1, 1)`` after ``..., out_channels, ... = ...``: the
    constructor's parameter ``bias_shape`` shadows it; copied, it failed the import."""
    source = (Path(__file__).resolve().parents[1] / "examples" / "conv_relu_bias.py").read_text()
    candidate = check(source, atol=1e-4, rtol=1e-4)
    assert "bias_shape = (out_channels" not in candidate


CONFIG_RECORD = '''
import math as m
from dataclasses import dataclass, field

import torch
import torch.nn as nn


@dataclass
class MLPConfig:
    width: int = 12
    ratio: float = 2.0
    act: str = "silu"
    taps: list = field(default_factory=lambda: [1, 2])


class Model(nn.Module):
    def __init__(self, cfg: MLPConfig, extra: dict):
        super().__init__()
        hidden = int(m.ceil(cfg.width * cfg.ratio))
        self.up, self.down = nn.Linear(cfg.width, hidden), nn.Linear(hidden, cfg.width)
        self.act = nn.SiLU() if cfg.act == "silu" else nn.ReLU()
        self.scale = extra["scale"] * len(cfg.taps)

    def forward(self, x):
        return x + self.scale * self.down(self.act(self.up(x)))


def get_inputs():
    return [torch.randn(3, 12)]


def get_init_inputs():
    return [MLPConfig(act="relu"), {"scale": 0.25}]
'''


def test_a_dataclass_config_and_an_aliased_math_module_reach_the_constructor():
    """A program that defines a dataclass loads (``dataclasses`` looks its module up in
    ``sys.modules``), and ModelNew's constructor gets the record and ``math`` it reads."""
    candidate = check(CONFIG_RECORD, atol=1e-5, rtol=1e-5)
    assert "import dataclasses" in candidate and "import math" in candidate


def test_a_program_defining_a_dataclass_is_judged():
    """The judge's worker loads reference and candidate the same way (it failed to load them)."""
    from drtriton.judge import JudgeConfig, verify

    candidate = compile_program(CONFIG_RECORD, CompilerConfig(device="cpu"))
    assert verify(CONFIG_RECORD, candidate, JudgeConfig(device="cpu")).status == "correct"


CONTRASTIVE = '''
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self, dim=16):
        super().__init__()
        self.image_proj, self.text_proj = nn.Linear(24, dim), nn.Linear(12, dim)
        self.logit_scale = nn.Parameter(torch.ones([]) * np.log(1 / 0.07))

    def forward(self, image, text):
        i = F.normalize(self.image_proj(image), dim=-1)
        t = F.normalize(self.text_proj(text), dim=-1)
        return self.logit_scale.exp() * i @ t.t()


def get_inputs():
    return [torch.randn(4, 24), torch.randn(4, 12)]


def get_init_inputs():
    return []
'''


def test_numpy_in_the_constructor_clips_logit_scale():
    """CLIP sets its logit scale with ``np.log``: numpy, where installed, is imported by the
    candidate's constructor too."""
    candidate = check(CONTRASTIVE, atol=1e-5, rtol=1e-5)
    assert "import numpy" in candidate


MODULE_NAMES = '''
import torch
import torch.nn as nn


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.add_module("1", nn.Linear(4, 4))

    def forward(self, x):
        return getattr(self, "1")(x)


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.branches = nn.ModuleDict({"3x3": nn.Linear(4, 4), "conv-a": nn.Linear(4, 4),
                                       "conv_a": nn.Linear(4, 4), "in": nn.Linear(4, 4),
                                       "0": nn.Linear(4, 4)})
        self.seq = nn.Sequential(nn.Linear(4, 4), nn.ReLU())
        self.block = Block()

    def forward(self, x):
        b = self.branches
        y = b["3x3"](x) + b["conv-a"](x) * b["conv_a"](x) - b["in"](x) + b["0"](x)
        return self.block(self.seq(y))


def get_inputs():
    return [torch.randn(2, 4)]


def get_init_inputs():
    return []
'''


def test_modules_named_by_keys_that_are_not_identifiers_are_read_by_name():
    """ModuleDict keys "3x3", "conv-a", "in" and "0" (a candidate that did not compile, or
    read ``self.branches[0]``: a KeyError), beside "conv_a", and ``add_module("1", ...)``."""
    check(MODULE_NAMES)


def test_average_pooling_arguments_by_position():
    """``F.avg_pool2d(x, 3, 2, 1, True, False)``: ceil_mode and count_include_pad by position
    (there is no dilation argument; they were read one place off)."""
    src = MODULE_NAMES.split("class Block")[0] + '''
import torch.nn.functional as F


class Model(nn.Module):
    def forward(self, x):
        return (F.avg_pool2d(x, 3, 2, 1, True, False), F.avg_pool1d(x[0], 2, 1, 1, True),
                F.avg_pool2d(x, 2, 2, 0, False, True, 3))


def get_inputs():
    return [torch.randn(2, 3, 7, 7)]


def get_init_inputs():
    return []
'''
    check(src)


BASES = '''
from functools import partial

import torch
import torch.nn as nn

CFG = {"tiny": {"dim": 4, "widths": [w * 2 for w in (1, 2)]}}
NORM = partial(nn.LayerNorm, eps=1e-3)
SCALES = tuple(range(1, 3))


class ConvBlock(nn.Module):
    def __init__(self, cin, cout):
        super().__init__()
        self.fc = nn.Linear(cin, cout)
        self.norm = NORM(cout)


class Model(ConvBlock):
    def __init__(self, c):
        super().__init__(CFG["tiny"]["dim"], CFG["tiny"]["widths"][-1] * c)

    def forward(self, x):
        return self.norm(self.fc(x)) * SCALES[-1]


def get_inputs():
    return [torch.randn(2, 4)]


def get_init_inputs():
    return [1]
'''

SEQUENTIAL = '''
import torch
import torch.nn as nn


class Model(nn.Sequential):
    def __init__(self, width):
        super().__init__(nn.Linear(4, width), nn.ReLU(), nn.Linear(width, 3))


class Stack(nn.Sequential):
    pass


def get_inputs():
    return [torch.randn(2, 4)]


def get_init_inputs():
    return [8]
'''


@pytest.mark.parametrize("source", [BASES, SEQUENTIAL, SEQUENTIAL.replace(
    "class Model(nn.Sequential):\n    def __init__(self, width):\n        super().__init__(",
    "class Model(nn.Sequential):\n    pass\n\n\nclass Unused:\n    def f(self, width):\n"
    "        return (").replace("get_init_inputs():\n    return [8]",
                              "get_init_inputs():\n    return [nn.Linear(4, 3), nn.ReLU()]")],
    ids=["user_base_and_module_level_values", "sequential", "sequential_without_init"])
def test_model_subclassing_another_class_and_module_level_values(source):
    """``class Model(ConvBlock)`` and ``class Model(nn.Sequential)``: ModelNew subclasses the
    same bases (it subclassed nn.Module: its constructor got arguments it did not take), and
    a constructor reads a dict, a comprehension and a ``partial`` made at module level (they
    were not copied: a NameError in ModelNew's constructor)."""
    check(source)
