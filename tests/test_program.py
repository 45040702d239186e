"""drtriton.program: parsing source and seeding torch safely from several threads of one process."""

import ast
import threading
from pathlib import Path

import torch

from drtriton.program import load_program, parse_python

SRC = Path(__file__).parent.parent / "src" / "drtriton"


def test_every_parse_in_the_project_goes_through_the_locked_parser():
    # Regression: a CPU bench with two judge slots failed with "SystemError: AST constructor
    # recursion depth mismatch" (CPython 3.11 counts that depth per interpreter, not per thread).
    bare = [str(p.relative_to(SRC)) for p in SRC.rglob("*.py")
            if p.name != "program.py" and "ast.parse(" in p.read_text()]
    assert not bare, f"call drtriton.program.parse_python instead of ast.parse in {bare}"


def _string_literal_evals(path: Path) -> list[str]:
    """``ast.literal_eval`` calls in ``path`` that may parse a string: their argument is neither
    a node's field (``node.value``) nor ``parse_python(...)``."""
    found = []
    for node in ast.walk(parse_python(path.read_text())):
        if isinstance(node, ast.Call) and ast.unparse(node.func) == "ast.literal_eval":
            arg = node.args[0]
            parsed = isinstance(arg, ast.Call) and ast.unparse(arg.func) == "parse_python"
            if not (parsed or isinstance(arg, ast.Attribute)):
                found.append(f"{path.relative_to(SRC)}:{node.lineno}")
    return found


def test_literal_eval_of_text_goes_through_the_locked_parser():
    # Regression: ast.literal_eval(text) parses text with ast.parse, bypassing the lock
    # (search/fragments.py did).
    found = [line for p in SRC.rglob("*.py") for line in _string_literal_evals(p)]
    assert not found, f"use ast.literal_eval(parse_python(text, mode='eval')) at {found}"


class _Cycle:
    def __del__(self):  # collected by the cyclic GC, which runs Python code inside a parse
        sum(range(20))


def test_parses_in_several_threads_with_the_collector_running_agree():
    # Three threads parse while a fourth makes cyclic garbage, so the collector runs __del__
    # (Python code) in the middle of a parse: with bare ast.parse this failed in 2 of 3 runs here.
    source = (SRC / "compiler" / "lower.py").read_text()
    expected = len(parse_python(source).body)
    errors = []

    def churn():
        for _ in range(3000):
            junk = [_Cycle() for _ in range(50)]
            for j in junk:
                j.me = j
            del junk

    def parse():
        for _ in range(15):
            try:
                assert len(parse_python(source).body) == expected
            except (SystemError, AssertionError) as exc:
                errors.append(repr(exc))

    threads = [threading.Thread(target=churn)] + [threading.Thread(target=parse) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors


def _unlocked_seeds(path: Path) -> list[str]:
    """``torch.manual_seed`` calls in ``path`` outside a ``with TORCH_STATE_LOCK`` block."""
    found = []

    def visit(node: ast.AST, locked: bool) -> None:
        if isinstance(node, ast.With):
            locked = locked or any("TORCH_STATE_LOCK" in ast.unparse(i.context_expr)
                                   for i in node.items)
        if (
            isinstance(node, ast.Call)
            and ast.unparse(node.func) == "torch.manual_seed"
            and not locked
        ):
            found.append(f"{path.relative_to(SRC)}:{node.lineno}")
        for child in ast.iter_child_nodes(node):
            visit(child, locked)

    visit(parse_python(path.read_text()), False)
    return found


def test_every_seed_in_the_judges_process_holds_the_torch_state_lock():
    # Regression: the compiler seeded and built a model in one bench thread between the judge's
    # seed and its draws in another, and a correct candidate was rejected ("inputs differ").
    # judge/worker.py runs in the sandboxed child, a process of its own.
    found = [line for p in SRC.rglob("*.py") if p.name != "worker.py"
             for line in _unlocked_seeds(p)]
    assert not found, f"seed under drtriton.program.TORCH_STATE_LOCK at {found}"


def test_a_program_with_a_torchscript_helper_loads():
    """``@torch.jit.script`` compiles a function from its source, which ``inspect`` finds for a
    program only if its lines are registered (loading it failed with OSError)."""
    source = """
import torch
import torch.nn as nn


@torch.jit.script
def double(x):
    return x * 2


class Model(nn.Module):
    def forward(self, x):
        return double(x)


def get_inputs():
    return [torch.randn(4)]


def get_init_inputs():
    return []
"""
    module = load_program(source, "scripted")
    x = torch.randn(4)
    assert torch.equal(module.Model()(x), x * 2)


def test_an_output_that_is_not_a_flat_tuple_of_tensors_is_named():
    import pytest
    import torch

    from drtriton.program import ProgramError, as_output_tuple

    x = torch.ones(2)
    assert as_output_tuple((x, x)) == (x, x)
    with pytest.raises(ProgramError, match="output 0 is a tuple"):
        as_output_tuple(((x, x), x))
    with pytest.raises(ProgramError, match="got a dict"):
        as_output_tuple({"a": x})
