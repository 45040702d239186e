"""CSP-DAG synthesis: coverage, unbiased sampling, validity, determinism, records."""

import ast
import random
from collections import Counter

import pytest
import torch

from drtriton.ops import OP_NAMES, OPS
from drtriton.program import load_program, run_program
from drtriton.synth import (
    SynthConfig,
    SynthError,
    SynthProgram,
    check_program,
    draw_program,
    level_ops,
    read_jsonl,
    synthesize,
    write_jsonl,
)


def _op_lines(source: str) -> list[str]:
    """Lines of forward() that apply an operator (t<i> = ...)."""
    tree = ast.parse(source)
    model = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "Model")
    forward = next(n for n in model.body if isinstance(n, ast.FunctionDef) and n.name == "forward")
    return [ast.unparse(s) for s in forward.body if isinstance(s, ast.Assign)]


@pytest.fixture(scope="module")
def level1():
    return synthesize(SynthConfig(level=1, num=61, seed=0, scale="small"))


def test_level1_covers_all_61_operators(level1):
    assert [p.ops[0] for p in level1] == list(OP_NAMES)


def test_level1_programs_run_with_finite_outputs(level1):
    for p in level1:
        _, outputs = run_program(load_program(p.source), seed=0)
        assert [list(o.shape) for o in outputs] == p.output_shapes, p.ops
        assert all(torch.isfinite(o.float()).all() for o in outputs), p.ops


def test_level2_sweep_reaches_every_ordered_pair():
    n = len(OPS)
    pairs = {tuple(level_ops(2, i, random.Random(0))) for i in range(n * n)}
    assert len(pairs) == n * n


def test_level2_random_pairs_synthesize():
    # every pair is reachable (slow test: all 3721); here a seeded sample of them
    indices = random.Random(7).sample(range(61 * 61), 12)
    for i in indices:
        p = synthesize(SynthConfig(level=2, num=1, seed=1, scale="small", start_index=i))[0]
        assert p.ops == level_ops(2, i, random.Random(0))


@pytest.mark.slow
def test_every_level2_pair_synthesizes():
    programs = synthesize(SynthConfig(level=2, num=61 * 61, seed=0, scale="small", workers=2))
    assert len({tuple(p.ops) for p in programs}) == 61 * 61


def test_higher_levels_draw_operators_uniformly():
    counts = Counter()
    draws = 200 * len(OPS)
    for i in range(draws // 5):
        counts.update(level_ops(5, i, random.Random(f"uniform:{i}")))
    expected = draws / len(OPS)
    chi2 = sum((counts[name] - expected) ** 2 / expected for name in OP_NAMES)
    assert set(counts) == set(OP_NAMES)
    assert chi2 < 99.6  # chi-square critical value, 60 degrees of freedom, p = 0.001


@pytest.mark.parametrize("level,num", [(2, 12), (5, 8), (20, 3)])
def test_programs_have_level_ops_and_run_finite(level, num):
    programs = synthesize(SynthConfig(level=level, num=num, seed=3, scale="small"))
    for p in programs:
        assert len(p.ops) == level
        assert len(_op_lines(p.source)) == level
        _, outputs = run_program(load_program(p.source), seed=11)
        assert all(torch.isfinite(o.float()).all() for o in outputs)
        assert [list(o.shape) for o in outputs] == p.output_shapes


def test_same_seed_same_bytes_other_seed_different(tmp_path):
    a = synthesize(SynthConfig(level=5, num=4, seed=42, scale="small"))
    b = synthesize(SynthConfig(level=5, num=4, seed=42, scale="small"))
    c = synthesize(SynthConfig(level=5, num=4, seed=43, scale="small"))
    write_jsonl(a, tmp_path / "a.jsonl")
    write_jsonl(b, tmp_path / "b.jsonl")
    assert (tmp_path / "a.jsonl").read_bytes() == (tmp_path / "b.jsonl").read_bytes()
    assert all(x.source != y.source for x, y in zip(a, c, strict=True))


def test_level1_other_seed_changes_shapes():
    a = synthesize(SynthConfig(level=1, num=10, seed=0, scale="small"))
    b = synthesize(SynthConfig(level=1, num=10, seed=1, scale="small"))
    assert sum(x.input_shapes != y.input_shapes for x, y in zip(a, b, strict=True)) >= 8


def test_workers_do_not_change_the_output():
    one = synthesize(SynthConfig(level=2, num=6, seed=5, scale="small", workers=1))
    two = synthesize(SynthConfig(level=2, num=6, seed=5, scale="small", workers=2))
    assert [p.to_json() for p in one] == [p.to_json() for p in two]


def test_records_roundtrip_and_load_with_datasets(tmp_path):
    programs = synthesize(SynthConfig(level=2, num=5, seed=0, scale="small"))
    path = tmp_path / "p.jsonl"
    write_jsonl(programs, path)
    assert read_jsonl(path) == programs
    datasets = pytest.importorskip("datasets")
    ds = datasets.load_dataset("json", data_files=str(path), split="train")
    assert ds.num_rows == 5
    assert ds[0]["id"] == programs[0].id and ds[0]["ops"] == programs[0].ops


def test_record_fields():
    (p,) = synthesize(SynthConfig(level=1, num=1, seed=0, scale="small", start_index=15))
    assert isinstance(p, SynthProgram)
    assert p.ops == ["Matmul"] and p.level == 1 and p.scale == "small" and p.checked == "run"
    assert len(p.id) == 16 and p.flops > 0 and p.total_numel > 0
    assert len(p.input_shapes) == 2 and p.output_dtypes == ["float32"]


def test_gpu_scale_is_shape_checked_on_meta_on_a_cpu():
    programs = synthesize(SynthConfig(level=2, num=3, seed=0, scale="gpu", start_index=100))
    assert all(p.checked == "meta" for p in programs)
    assert all(p.flops <= 2**35 for p in programs)


def _draft(source_body: str, inputs: str, out_shape):
    source = f"""import torch
import torch.nn as nn
import torch.nn.functional as F
class Model(nn.Module):
    def forward(self, x0, x1):
        {source_body}
def get_inputs():
    return [{inputs}]
def get_init_inputs():
    return []
"""
    from drtriton.synth import _Draft

    return _Draft(["X"], source, 1, 1, [], [out_shape], ["float32"])


@pytest.mark.parametrize(
    "body,reason",
    [
        ("return x0 * 0 + x1 * 0", "constant_output"),
        ("return x0 + 0 * x1", "unused_input"),
        ("return x0 / torch.zeros_like(x1)", "nonfinite"),
        ("return x0[:2] + x1[:2]", "shape_mismatch"),
        (
            "return torch.argmax(((x0 + 0.1) - x0) * x1.abs().sum(), dim=-1, keepdim=True) * 1.0"
            " + x1[:, :1]",
            "ill_conditioned",
        ),
        ("return x0 + x1", None),
    ],
)
def test_quality_filters(body, reason):
    shape = [4, 1] if "argmax" in body else [4, 8]
    draft = _draft(body, "torch.randn(4, 8), torch.randn(4, 8)", shape)
    assert check_program(draft, "run") == reason


def test_bad_config_is_a_clear_error():
    for bad, match in [
        (dict(level=0), "level"),
        (dict(num=0), "num"),
        (dict(scale="huge"), "scale"),
        (dict(check="maybe"), "check"),
    ]:
        kwargs = dict(level=1, num=1) | bad
        with pytest.raises(SynthError, match=match):
            synthesize(SynthConfig(**kwargs))


def test_draw_reports_infeasible_structures():
    # Max then Min with keepdim on a rank-2 input can leave a 1-element output (< 32): infeasible
    outcomes = [draw_program(["Max", "Min"], "small", random.Random(k)) for k in range(10)]
    assert "infeasible" in outcomes
    assert any(not isinstance(o, str) for o in outcomes)


def test_degenerate_pair_is_still_reachable():
    # Regression: ReLU(LogSigmoid(x)) is zero for every shape, so the chained draw is always
    # rejected; the sweep must still produce a valid program for the pair.
    index = OP_NAMES.index("LogSigmoid") * len(OPS) + OP_NAMES.index("ReLU")
    (p,) = synthesize(SynthConfig(level=2, num=1, seed=0, scale="small", start_index=index))
    assert p.ops == ["LogSigmoid", "ReLU"]
    assert len(_op_lines(p.source)) == 2
