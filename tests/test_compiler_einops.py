"""``einops.rearrange`` in a reference: kept as one call by the capture (einops refuses fx's
proxies) and lowered to views; checked against PyTorch in the interpreter."""

from __future__ import annotations

import os

os.environ.setdefault("TRITON_INTERPRET", "1")

import pytest  # noqa: E402

from compiler_cases.harness import check  # noqa: E402
from drtriton.compiler import CompilerConfig, UnsupportedOperatorError, compile_program  # noqa: E402

pytest.importorskip("einops")

PROGRAM = '''
import torch
import torch.nn as nn
from einops import rearrange


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(PROJ, PROJ)

    def forward(self, x):
        y = rearrange(x, PATTERN)
        return self.proj(torch.relu(y))


def get_inputs():
    return [torch.randn(SHAPE)]


def get_init_inputs():
    return []
'''

CASES = {  # pattern (with sizes), input shape, the last dim of the result
    "tokens_from_a_feature_map": ('"b c h w -> b (h w) c"', (2, 3, 4, 5), 3),
    "vit_patches": ('"b c (h p1) (w p2) -> b (h w) (p1 p2 c)", p1=2, p2=2', (2, 3, 4, 6), 12),
    "heads_split": ('"b n (heads d) -> b heads n d", heads=2', (2, 5, 8), 4),
    "feature_map_from_tokens": ('"b (h w) c -> b c w h", h=2', (2, 6, 4), 2),
    "unit_axis": ('"b c h w -> b h w c 1"', (2, 3, 4, 5), 1),
}


def _program(pattern: str, shape: tuple, last: int) -> str:
    return (PROGRAM.replace("PATTERN", pattern).replace("SHAPE", repr(shape))
            .replace("PROJ", str(last)))


@pytest.mark.parametrize("mode", ["strict", "hybrid"])
@pytest.mark.parametrize("name", sorted(CASES))
def test_rearrange_matches_einops(name, mode):
    check(_program(*CASES[name]), mode)


def test_a_rearrange_with_an_ellipsis_is_refused_by_fx_and_exported_by_auto():
    """fx keeps ``rearrange`` as one call and its lowering refuses an ellipsis; torch.export
    traces through einops into views, which the default capture then converts."""
    source = _program('"b ... c -> b c ..."', (2, 3, 4, 5), 4)
    with pytest.raises(UnsupportedOperatorError, match="einops"):
        compile_program(source, CompilerConfig(device="cpu", capture="fx"))
    check(source)


PATCH_EMBEDDING = '''
import torch
import torch.nn as nn
from einops.layers.torch import Rearrange


class Model(nn.Module):
    def __init__(self, channels=3, patch=4, dim=32):
        super().__init__()
        self.to_patches = nn.Sequential(
            Rearrange("b c (h p1) (w p2) -> b (h w) (p1 p2 c)", p1=patch, p2=patch),
            nn.LayerNorm(patch * patch * channels),
            nn.Linear(patch * patch * channels, dim),
        )
        self.to_image = Rearrange("b (h w) d -> b d h w", h=2)

    def forward(self, img):
        return self.to_image(self.to_patches(img))


def get_inputs():
    return [torch.randn(2, 3, 8, 16)]


def get_init_inputs():
    return []
'''


def test_rearrange_layers_in_a_vit_patch_embedding():
    """``einops.layers.torch.Rearrange`` built in the constructor (its import copied into the
    candidate) and lowered as the function."""
    candidate = check(PATCH_EMBEDDING, atol=1e-5, rtol=1e-5)
    assert "import einops.layers.torch" in candidate


HELPER_CLASS = '''
import torch
import torch.nn as nn
from einops import rearrange


class MergeHeads(nn.Module):
    def forward(self, x):
        return rearrange(x, "b h n d -> b n (h d)")


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.merge = MergeHeads()

    def forward(self, x):
        return self.merge(x) + 1


def get_inputs():
    return [torch.randn(2, 4, 3, 8)]


def get_init_inputs():
    return []
'''


def test_a_helper_module_calling_rearrange_is_copied_with_its_import():
    candidate = check(HELPER_CLASS)
    assert "import einops" in candidate
