"""Compiler unit tests: IR view folding, errors, emitted file structure, fusion, CUDA emission.

Run: .venv/bin/python -m pytest -q tests/test_compiler.py   (Triton interpreter, a few seconds)
"""

from __future__ import annotations

import ast
import os

os.environ.setdefault("TRITON_INTERPRET", "1")

import dataclasses  # noqa: E402

import pytest  # noqa: E402
import torch  # noqa: E402

from compiler_cases.harness import check, program, run_pair  # noqa: E402
from compiler_cases.ops61 import source  # noqa: E402
from compiler_cases.realworld import CASES  # noqa: E402
from drtriton.compiler import (  # noqa: E402
    CompilerConfig,
    UnsupportedOperatorError,
    compile_program,
    ir,  # noqa: E402
)
from drtriton.compiler.capture import PURE_MODULES

# ---------------------------------------------------------------- IR


def _materialise(e: ir.Load, base: torch.Tensor) -> torch.Tensor:
    return torch.as_strided(base, e.shape, e.strides, e.offset)


@pytest.mark.parametrize(
    "steps",
    [
        [("permute", (2, 0, 1)), ("reshape", (5, 12))],
        [("transpose", (0, 1)), ("slice", (slice(1, 3), slice(None, None, 2)))],
        [("reshape", (3, 20)), ("broadcast", (2, 3, 20)), ("permute", (1, 2, 0))],
        [("slice", (0,)), ("reshape", (20,))],
    ],
)
def test_views_fold_into_strides_like_torch(steps):
    base = torch.arange(60.0)
    t = base.view(3, 4, 5)
    e: ir.Expr = ir.Load((3, 4, 5), torch.float32, "x", (20, 5, 1), 0)
    for kind, argv in steps:
        if kind == "permute":
            t, e = t.permute(*argv), ir.permute(e, argv)
        elif kind == "transpose":
            t, e = t.transpose(*argv), ir.transpose(e, *argv)
        elif kind == "reshape":
            t, e = t.reshape(argv), ir.reshape(e, argv)
        elif kind == "broadcast":
            t, e = t.expand(argv), ir.broadcast_to(e, argv)
        elif kind == "slice":
            from drtriton.compiler.lowerings.views import _index

            t, e = t[argv], _index(e, argv)
    assert e.shape == tuple(t.shape)
    if isinstance(e, ir.Load):
        assert torch.equal(_materialise(e, base), t)
    else:  # a reshape that needs a copy stays an index remapping
        assert isinstance(e, ir.Reshape)


def test_reshape_of_transposed_needs_remap():
    e = ir.transpose(ir.Load((3, 4), torch.float32, "x", (4, 1), 0), 0, 1)
    assert isinstance(ir.reshape(e, (12,)), ir.Reshape)


# ---------------------------------------------------------------- config and errors


def test_config_is_frozen_and_validated():
    cfg = CompilerConfig()
    assert (cfg.mode, cfg.device) == ("strict", "cpu")
    with pytest.raises(dataclasses.FrozenInstanceError):
        cfg.mode = "hybrid"  # type: ignore[misc]
    with pytest.raises(ValueError):
        CompilerConfig(mode="fast")
    with pytest.raises(ValueError):
        CompilerConfig(device="tpu")


@pytest.mark.parametrize(
    "body, op",
    [
        ("return torch.linalg.inv(a[:, :3])", "inv"),
        ("y = torch.relu(a)\nreturn torch.fft.fft(y)", "fft"),
        ("return a[a > 0]", "getitem"),
        ("return F.dropout(a, p=0.5, training=True)", "dropout"),
        ("return torch.histc(a, bins=4)", "histc"),
    ],
)
def test_unsupported_operator_names_op_and_line(body, op):
    src = program(body, [(3, 5)])
    with pytest.raises(UnsupportedOperatorError) as info:
        compile_program(src, CompilerConfig())
    err = info.value
    assert isinstance(err, ValueError)
    assert op in str(err)
    assert err.line > 0 and err.text and err.text in src.splitlines()[err.line - 1]


# ---------------------------------------------------------------- emitted file


def _imports(candidate: str) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(candidate)):
        if isinstance(node, ast.Import):
            names |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            names.add(node.module or "")
    return names


def _forward_statements(candidate: str) -> list[ast.stmt]:
    tree = ast.parse(candidate)
    cls = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "ModelNew")
    fwd = next(n for n in cls.body if isinstance(n, ast.FunctionDef) and n.name == "forward")
    return fwd.body


def _allowed(stmt: ast.stmt) -> bool:
    """Allocation, .contiguous(), .device, a kernel launch ``k[grid](...)``, return of views, or
    the refusal of the mode forward was not compiled for."""
    if isinstance(stmt, ast.If):
        return (ast.unparse(stmt.test).startswith("self.training is not ")
                and [type(s) for s in stmt.body] == [ast.Raise] and not stmt.orelse)
    if isinstance(stmt, ast.Return):
        return "torch." not in ast.unparse(stmt)
    value = stmt.value if isinstance(stmt, ast.Assign | ast.Expr) else None
    if isinstance(value, ast.Attribute):
        return value.attr == "device"
    if not isinstance(value, ast.Call):
        return False
    func = value.func
    if isinstance(func, ast.Subscript):  # kernel[grid](...)
        return isinstance(func.value, ast.Name) and func.value.id.startswith("k")
    text = ast.unparse(func)
    return text == "torch.empty" or text.endswith(".contiguous")


@pytest.mark.parametrize("name", sorted(CASES))
def test_strict_forward_only_allocates_views_and_launches(name):
    candidate = compile_program(CASES[name], CompilerConfig(mode="strict"))
    # torch and triton, and the standard modules a constructor may use (copied from the reference)
    assert {"torch", "triton", "triton.language"} <= _imports(candidate)
    assert _imports(candidate) <= {"torch", "triton", "triton.language", *PURE_MODULES}
    for stmt in _forward_statements(candidate):
        assert _allowed(stmt), ast.unparse(stmt)


def test_every_kernel_has_a_docstring_naming_ops():
    candidate = compile_program(CASES["attention_scores"], CompilerConfig())
    tree = ast.parse(candidate)
    kernels = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name.startswith("k")]
    assert kernels
    for k in kernels:
        doc = ast.get_docstring(k) or ""
        assert doc.startswith("Fused:") and ("torch." in doc or "nn." in doc or "F." in doc)


def test_cuda_emission_carries_autotune_and_parses(monkeypatch):
    from drtriton.compiler import kernels

    # these programs are small: tune them anyway
    monkeypatch.setattr(kernels.writer, "SMALL_WORK", 0)
    for src in (CASES["attention_scores"], CASES["conv_relu_bias"], source("cumsum")):
        candidate = compile_program(src, CompilerConfig(device="cuda"))
        ast.parse(candidate)
        assert "@triton.autotune(" in candidate
        assert "lambda META" in candidate


def test_seeded_init_matches_reference_parameters():
    from compiler_cases.harness import run_pair

    src = CASES["mlp_mish_hardswish"]
    want, got = run_pair(src, compile_program(src, CompilerConfig()), seed=7)
    torch.testing.assert_close(got[0], want[0], atol=1e-5, rtol=1e-5)


# ---------------------------------------------------------------- fusion


def test_elementwise_chain_with_broadcast_is_one_kernel():
    src = program(
        "x = torch.add(a, b)\ny = torch.sigmoid(x)\nz = torch.mul(y, c)\nreturn F.silu(z)",
        [(3, 4, 5), (5,), (4, 1)],
    )
    assert check(src).count("@triton.jit") == 1


def test_reduction_epilogue_and_prologue_fuse():
    # exp prologue into the sum; the division epilogue into the same kernel
    src = program("s = torch.sum(torch.exp(a), dim=1)\nreturn torch.div(s, 3.0)", [(4, 9)])
    assert check(src).count("@triton.jit") == 1


@pytest.mark.parametrize(
    ("body", "shapes", "materialised"),
    [
        # GELU of a product: ~8 operators re-evaluated at ~19 window reads of each element
        ("return F.max_pool3d(F.gelu(torch.sigmoid(a) * a), kernel_size=4, stride=1)",
         [(1, 2, 9, 9, 9)], True),
        ("return F.max_pool3d(torch.relu(a), kernel_size=4, stride=1)", [(1, 2, 9, 9, 9)], False),
        ("return F.avg_pool2d(F.gelu(a), kernel_size=2, stride=2)", [(1, 2, 8, 8)], False),
        # strict matmul: the prologue of A is re-read by N / 64 = 16 column tiles
        ("return torch.matmul(F.gelu(torch.sigmoid(a) * a), b)", [(8, 16), (16, 1024)], True),
        ("return F.conv2d(F.gelu(torch.sigmoid(a) * a), b, padding=1)",
         [(1, 3, 8, 8), (4, 3, 3, 3)], True),
    ],
)
def test_costly_prologue_of_a_window_or_tile_kernel_is_materialised(body, shapes, materialised):
    src = program(body, shapes)
    fused = compile_program(src, CompilerConfig(max_window_recompute=float("inf")))
    default = check(src)  # the default setting, verified against eager
    extra = default.count("@triton.jit") - fused.count("@triton.jit")
    assert extra == int(materialised)
    want, got = run_pair(src, fused)
    torch.testing.assert_close(got[0], want[0], atol=1e-4, rtol=1e-4)


def test_producer_with_two_consumers_is_not_fused_away():
    src = program(
        "y = torch.matmul(a, b)\nreturn torch.relu(y), torch.add(y, 1.0)", [(5, 6), (6, 7)]
    )
    check(src)


def test_views_between_ops_are_index_arithmetic():
    src = program("x = torch.transpose(a, -2, -1)\ny = x.reshape(2, 15)\nreturn torch.relu(y)",
                  [(2, 5, 3)])
    candidate = check(src)
    assert candidate.count("@triton.jit") == 1


def test_diamond_graph_and_shared_subexpressions():
    src = program(
        "x = torch.tanh(a)\ny = torch.mul(x, x)\nz = torch.sum(y, dim=0)\nreturn torch.add(x, z)",
        [(6, 5)],
    )
    check(src)


def test_hybrid_keeps_matmul_in_torch_and_fuses_epilogue():
    candidate = check(CASES["linear_gelu"], mode="hybrid")
    assert "torch.matmul(" in candidate
    assert candidate.count("@triton.jit") == 1


def test_a_returned_view_of_a_result_is_a_view_not_a_copy_kernel():
    # Regression (H200 run): bmm followed by transpose spent a second kernel copying the result
    # into the transposed layout; eager returns a view. Views of inputs are still copied (an
    # output aliasing an input is rejected by the judge).
    from drtriton.judge import JudgeConfig, verify

    src = program("return torch.bmm(a, b).transpose(-2, -1)", [(3, 20, 40), (3, 40, 24)])
    candidate = check(src)
    assert candidate.count("@triton.jit") == 1 and ".as_strided(" in candidate.split("return")[-1]
    assert verify(src, candidate, JudgeConfig(device="cpu")).status == "correct"
    copied = check(program("return a.transpose(0, 1)", [(4, 6)]))
    assert copied.count("@triton.jit") == 1 and "as_strided" not in copied


@pytest.mark.parametrize("body, shapes", [
    ("return torch.transpose(a, -2, -1)", [(8, 1, 4)]),  # a size-1 dim: the same memory order
    ("return a.reshape(4, 8)", [(2, 16)]),
    ("return a", [(5, 3)]),
    ("return a.unsqueeze(1), torch.relu(a)", [(6,)]),
])
def test_an_output_in_an_inputs_memory_order_is_a_copy_not_a_view(body, shapes):
    # Regression (H100 pair sample): a transpose of a size-1 dim compiled to x0.view(...), which
    # the judge rejects: an output aliasing an input
    from drtriton.judge import JudgeConfig, verify

    src = program(body, shapes)
    candidate = check(src)
    returned = candidate.split("return")[-1]
    assert ".view(" not in returned and "a.view" not in returned and "@triton.jit" in candidate
    assert verify(src, candidate, JudgeConfig(device="cpu")).status == "correct"


@pytest.mark.parametrize(
    "call, shapes",
    [
        ("F.conv_transpose1d(a, b, stride=3, padding=1, output_padding=2)", [(2, 4, 7), (4, 5, 4)]),
        (
            "F.conv_transpose1d(a, b, stride=2, padding=4, dilation=3, groups=2)",
            [(1, 4, 9), (4, 3, 3)],
        ),
        (
            "F.conv_transpose2d(a, b, stride=(3, 1), padding=(0, 1), output_padding=(1, 0))",
            [(2, 3, 5, 4), (3, 2, 2, 3)],
        ),
        (
            "F.conv_transpose2d(a, b, stride=4, dilation=2, output_padding=1)",
            [(1, 2, 3, 2), (2, 3, 3, 2)],
        ),
        (
            "F.conv_transpose3d(a, b, stride=2, padding=1, groups=2)",
            [(1, 4, 3, 2, 3), (4, 1, 3, 2, 2)],
        ),
    ],
    ids=["1d-s3-op2", "1d-s2-dil3-g2", "2d-s31", "2d-s4-dil2", "3d-s2-g2"],
)
def test_strided_transposed_convolution_runs_one_phase_per_program(call, shapes):
    # Regression (H200): a stride-14 ConvTranspose2d as a gathering GEMM masked all but 1/196 of
    # its reduction and timed out. Phased: each program takes one output phase, skips dead taps.
    candidate = check(program(f"return torch.tanh({call})", shapes))
    assert "phase = tl.program_id(2) %" in candidate and "for tap in range(" in candidate


@pytest.mark.parametrize(
    "call, shapes, fill",
    [
        # taps 8 apart at stride 7 never meet: the shape of the H200's 0.07x row, small, grouped
        (
            "F.conv_transpose2d(a, b, stride=7, padding=4, output_padding=6, dilation=8, groups=3)",
            [(2, 6, 5, 1), (6, 1, 3, 5)],
            True,
        ),
        # a 1 x 1 x 1 input (the 0.05x row): one tap per output, most outputs reached by none; 20
        # output channels of 24 taps are one row of 480 columns (the matrix-vector form)
        (
            "F.conv_transpose3d(a, b, stride=9, padding=2, output_padding=5, dilation=5)",
            [(1, 5, 1, 1, 1), (5, 20, 3, 4, 2)],
            True,
        ),
        (
            "F.conv_transpose1d(a, b, stride=3, padding=1)",
            [(2, 4, 6), (4, 18, 2)],
            True,
        ),  # k < s: tl.dot
        # one input channel: the weight's index is the tile's column index alone
        ("F.conv_transpose2d(a, b, stride=4)", [(2, 1, 3, 2), (1, 3, 2, 3)], True),
        # cropped to positions 0..3, which taps 0 and 1 of inputs 0..3 all reach: no fill kernel
        (
            "F.conv_transpose1d(a, b, stride=2, padding=3, dilation=3)",
            [(3, 2, 4), (2, 1, 2)],
            False,
        ),
    ],
    ids=["2d-s7-dil8-g3", "3d-1x1x1", "1d-dot", "2d-one-channel", "1d-cropped"],
)
def test_transposed_convolution_whose_taps_never_meet_is_one_gemm_over_the_input(
    call, shapes, fill
):
    # Regression (H200): per-phase gathers read the weight one tap at a time at a stride of all its
    # taps (a ConvTranspose3d of a 1 x 1 x 1 input: 26 ms against cuDNN's 1.35 ms). The epilogue
    # maps 0 to 1, so the outputs no input reaches must go through it too (the fill kernel).
    candidate = check(program(f"return torch.exp({call})", shapes))
    assert "phase = " not in candidate and ("_fill(" in candidate) is fill
    assert candidate.count("@triton.jit") == 1 + fill


@pytest.mark.parametrize("channels, taps", [(3, (2, 2, 2)), (40, (3, 1, 2))])
def test_transposed_convolution_of_one_input_position_is_a_matrix_vector_product(channels, taps):
    # Regression (H200): a 1 x 1 x 1 input's one row took 16-row tl.dot tiles (4.9 ms for a
    # 101-vector times a 101 x 2.2M weight, 180 GB/s). A single row streams the weight instead.
    call = ("F.conv_transpose3d(a, b, stride=(5, 3, 4), padding=(1, 0, 0), output_padding=1, "
            "dilation=2)")
    candidate = check(
        program(f"return torch.exp({call})", [(1, channels, 1, 1, 1), (channels, 8, *taps)])
    )
    assert "part += " in candidate and "tl.dot(" not in candidate and "_fill(" in candidate


def test_narrow_transposed_convolution_whose_taps_never_meet_is_outer_products():
    # Regression (H200): 15 (channel, tap) columns summed as [BM x 16 x BK] broadcast products
    # reduced across lanes at every step (13.1 ms for 4.2 GB of input). One outer product per
    # input channel instead: no cross-lane sum, no tl.dot.
    call = "F.conv_transpose2d(a, b, stride=7, padding=4, output_padding=6, dilation=8, groups=3)"
    candidate = check(program(f"return torch.exp({call})", [(2, 6, 5, 1), (6, 1, 3, 5)]))
    conv = candidate[candidate.index("def k0_conv_transpose2d_exp("):]
    assert "for c in range(2):" in conv and "tl.sum(" not in conv and "tl.dot(" not in conv


def test_fill_of_a_transposed_convolution_tests_taps_per_column_not_per_element():
    # Regression (H200): the per-element fill of a ConvTranspose3d tested 29 taps for each of its
    # 214M outputs (1.5 ms). Reached positions do not depend on (n, channel): tested per column.
    # Here 36 of 64 positions are reached (6 of 8 per dim), so only the other 28 are filled.
    call = "F.conv_transpose2d(a, b, stride=3)"
    candidate = check(program(f"return torch.sigmoid({call})", [(2, 4, 3, 3), (4, 5, 2, 2)]))
    start = candidate.index("_fill(")
    fill = candidate[start:candidate.index("@triton.jit", start)]
    assert "tl.zeros([BC], dtype=tl.int1)" in fill and "fmask = (rr[:, None] <" in fill


def test_fill_of_a_mostly_unreached_output_writes_every_element():
    # Regression (H200): a masked fill of 3.5 GB ran at 1.1 TB/s (scalar stores). Where at most half
    # the outputs are reached (here 24 of 66 positions), the fill writes all and the GEMM
    # overwrites.
    call = "F.conv_transpose2d(a, b, stride=4, padding=1, output_padding=2)"
    candidate = check(program(f"return torch.sigmoid({call})", [(3, 4, 2, 3), (4, 5, 2, 3)]))
    start = candidate.index("_fill(")
    fill = candidate[start:candidate.index("@triton.jit", start)]
    assert "Every output" in fill and "hit" not in fill and "mask=offs < N)" in fill


def test_unreached_outputs_of_each_dim():
    from drtriton.compiler.kernels.spatial import ConvSpec, reached_count

    spec = ConvSpec(True, (2, 3), (1, 0), (1, 1), 1, (1, 1, 6, 9))
    assert reached_count(spec, 0, 3, 3) == 6  # i*2 - 1 + k, i < 3, k < 3: -1..5 covers 0..5
    assert reached_count(spec, 1, 3, 2) == 6  # i*3 + k, k < 2: 2, 5 and 8 are reached by none
    assert reached_count(spec, 1, 1 << 19, 3) is None  # too many pairs to count


@pytest.mark.parametrize("out_channels, dot", [(1, False), (5, False), (16, True), (20, True)])
def test_convolution_with_few_output_channels_skips_tl_dot(out_channels, dot):
    # tl.dot pads its N side to 16: a 1-channel output paid 16x the multiplies. Under 16 output
    # channels per group the tile is multiplied and summed directly.
    for call in ("F.conv2d(a, b, padding=1)", "F.conv_transpose2d(a, b.transpose(0, 1), stride=2)"):
        src = program(f"return {call}", [(2, 3, 5, 4), (out_channels, 3, 3, 3)])
        candidate = check(src)
        assert ("tl.dot(" in candidate) is dot
        assert ("tl.sum(" in candidate) is not dot


def test_hybrid_keeps_convolution_in_torch_and_fuses_around_it():
    candidate = check(CASES["conv_relu_bias"], mode="hybrid")
    assert "torch.nn.functional.conv2d(" in candidate and "@triton.jit" in candidate


def test_hybrid_program_with_nothing_left_for_triton_compiles_strict():
    # Regression: on the H200 a lone matmul compiled in hybrid mode launched no Triton kernel and
    # the judge rejected it ("no Triton kernel launched inside forward").
    candidate = check(program("return torch.matmul(a, b)", [(20, 40), (40, 24)]), mode="hybrid")
    assert "@triton.jit" in candidate and "torch.matmul" not in candidate.split("class ModelNew")[1]
    assert "mode: strict" in candidate


def test_convert_command_writes_and_verifies(tmp_path):
    from drtriton.commands import convert

    ref = tmp_path / "prog.py"
    ref.write_text(source("softmax"))
    out = tmp_path / "cand.py"
    messages: list[str] = []
    assert convert(str(ref), str(out), device="cpu", verify=False, echo=messages.append) == 0
    assert "class ModelNew" in out.read_text()
    bad = tmp_path / "bad.py"
    bad.write_text(program("return torch.histc(a, bins=4)", [(3, 4)]))
    assert convert(str(bad), str(tmp_path / "x.py"), device="cpu", echo=messages.append) == 2
    assert "histc" in messages[-1] and "line" in messages[-1]
    assert convert(str(tmp_path / "missing.py"), device="cpu", echo=messages.append) == 2


def test_inplace_ops_rebind_the_mutated_tensor_and_refuse_aliasing():
    check(
        program("y = torch.mul(a, 2.0)\ny.add_(b)\nreturn F.relu(y, inplace=True)", [(3, 4), (4,)])
    )
    check(program("y = torch.mul(a, 2.0)\nz = F.relu(y, inplace=True)\nreturn z + y", [(3, 4)]))
    check(program("y = torch.mul(a, 2.0)\nw = y * 3.0\ny.clamp_(min=0.1)\nreturn y, w", [(3, 4)]))
    # a chain updates the tensor, not only the first call's result (the fx capture once read y
    # after mul_ and lost add_; every output was off by one)
    chained = "y = torch.mul(a, 2.0)\ny.mul_(0.5).add_(1.0)\ny.clamp_(min=0.0)\nreturn y"
    check(program(chained, [(3, 4)]), capture="fx")
    aliased = program("y = torch.mul(a, 2.0)\nv = y.view(-1)\ny.add_(1.0)\nreturn v", [(3, 4)])
    with pytest.raises(UnsupportedOperatorError, match="in-place"):
        compile_program(aliased, CompilerConfig(capture="fx"))
    check(aliased)  # the default capture also tries torch.export, functionalised: no aliasing


def test_convert_example_verifies_with_the_judge(tmp_path):
    pytest.importorskip("drtriton.judge")
    from pathlib import Path

    from drtriton.commands import convert

    example = Path(__file__).resolve().parents[1] / "examples" / "conv_relu_bias.py"
    messages: list[str] = []
    code = convert(str(example), str(tmp_path / "out.py"), device="cpu", echo=messages.append)
    assert code == 0, messages
    assert any(m.startswith("verdict: correct") for m in messages)


def test_batched_matmul_beyond_the_grid_limit_loops_over_batches(monkeypatch):
    # Regression: CUDA caps grid axis 2 at 65535; a GPU-scale matmul with 34M batches failed to
    # launch ("invalid argument"). With the cap lowered to 2, 5 batches need the in-kernel loop.
    from drtriton.compiler import kernels

    monkeypatch.setattr(kernels.writer, "MAX_GRID_Z", 2)
    src = program("return torch.relu(torch.matmul(a, b))", [(5, 16, 33), (5, 33, 16)])
    candidate = check(src)
    assert "for pb in range(tl.program_id(2), 5, 2)" in candidate


@pytest.mark.parametrize(
    "shapes",
    [[(7, 21, 1), (7, 1, 1)], [(2, 5, 20), (20, 3)], [(3, 40, 30), (30, 9)], [(40, 16), (16, 20)]],
    ids=["k1-batched", "m5-broadcast-b", "m40-k30-n9", "k16"],
)
def test_skinny_matmul_is_one_elementwise_pass(shapes):
    # A matmul with K <= 16, or a side under tl.dot's 16-wide minimum and a short K, unrolls K in
    # an elementwise kernel over the output (tiles were mostly padding); the epilogue still fuses.
    src = program("return torch.sigmoid(torch.matmul(a, b))", shapes)
    candidate = check(src)
    assert "tl.dot" not in candidate
    assert candidate.count("@triton.jit") == 1


@pytest.mark.parametrize(
    "shapes, tiles",
    [([(3, 50, 16), (16, 38)], True), ([(70, 12), (12, 8)], True), ([(3, 7, 4), (3, 4, 9)], False),
     ([(5, 6, 3), (3, 4)], False)],
    ids=["x@W-n38", "2d-n8", "batched-b", "n4"],
)
def test_skinny_x_at_w_uses_output_tiles(shapes, tiles):
    # x @ W with a short K: [BM x N] tiles, one outer product per K step (the per-element form
    # ran at 0.37x cuBLAS on the H200). A batched right operand or N < 8 stays per element.
    candidate = check(program("return torch.relu(torch.matmul(a, b)) + 1.0", shapes))
    assert ("[:, None] * " in candidate and "rn = tl.arange(0," in candidate) is tiles
    assert "tl.dot" not in candidate


def test_matmul_with_a_long_reduction_keeps_tiles():
    candidate = check(program("return torch.matmul(a, b)", [(4, 40), (40, 20)]))
    assert "tl.dot" in candidate and "for k0 in range(0, 40" in candidate


@pytest.mark.parametrize("shapes", [[(4, 40), (40, 3)], [(5, 11, 70), (5, 70, 1)]])
def test_matmul_under_16_columns_sums_narrow_tiles_without_tl_dot(shapes):
    # tl.dot pads N to 16 and evaluated b's fused GELU on the padding: a (7788 x 11 x 6732) @
    # (6732 x 1) bmm took 17.8 ms on an H200
    candidate = check(program("return torch.matmul(a, F.gelu(b))", shapes))
    assert "tl.dot" not in candidate and "for k0 in range(0, " in candidate


def test_small_cuda_kernels_launch_a_fixed_config_and_large_ones_autotune():
    # Autotuning costs ~25 us per launch on an H200: kernels under SMALL_WORK elements skip it.
    cuda = CompilerConfig(device="cuda")
    small = compile_program(program("return torch.sigmoid(a) + b", [(50, 60), (60,)]), cuda)
    large = compile_program(program("return torch.sigmoid(a) + b", [(2048, 1024), (1024,)]), cuda)
    assert "triton.autotune" not in small and "num_warps=4)" in small
    assert "triton.autotune" in large and "num_warps=" not in large.split("class ModelNew")[1]


@pytest.mark.parametrize(("a", "b", "folded"), [
    ((5, 3, 1, 40), (40, 17), True),      # one W for every batch: 15 rows, one product
    ((6, 2, 40), (1, 40, 9), True),       # W broadcast over a batch of size 1
    ((6, 2, 40), (6, 40, 9), False),      # a W per batch: batched tiles
])
def test_matmul_with_one_matrix_for_every_batch_folds_the_batch_into_rows(a, b, folded):
    src = program("return torch.matmul(a, b)", [a, b])
    candidate = check(src)
    assert ("pb = tl.program_id(2)" not in candidate) == folded


def test_pool_windows_loop_only_over_offsets_that_can_reach_the_input():
    import itertools

    from drtriton.compiler.kernels.spatial import reachable_taps

    for k, s, p, d, n in itertools.product(
        range(1, 9), range(1, 4), range(5), range(1, 3), range(1, 12)
    ):
        n_out = (n + 2 * p - d * (k - 1) - 1) // s + 1
        if p > k // 2 or n_out < 1:
            continue
        lo, hi = reachable_taps(k, s, p, d, n, n_out)
        reached = {t for t in range(k) if any(0 <= o * s - p + t * d < n for o in range(n_out))}
        assert reached <= set(range(lo, hi + 1)), (k, s, p, d, n)
    # a depth of 1 under 4-wide windows with padding 2: one depth offset of 4 is looped over
    src = program("return F.max_pool3d(a, kernel_size=4, stride=2, padding=2)", [(1, 2, 1, 5, 6)])
    assert "for kk in range(0, 16)" in check(src)
    src = program("return F.avg_pool2d(a, kernel_size=3, stride=1, padding=1)", [(2, 1, 7)])
    assert "for kk in range(0, 3)" in check(src)


@pytest.mark.parametrize(("call", "shape"), [
    ("F.max_pool3d(a, kernel_size=5, stride=3, padding=2, dilation=1)", (1, 2, 1, 2, 7)),
    ("F.max_pool2d(a, kernel_size=3, stride=2, padding=1, dilation=2)", (2, 3, 3, 4)),
    ("F.avg_pool2d(a, kernel_size=5, stride=4, padding=2)", (1, 2, 6, 3)),
    ("F.avg_pool1d(a, kernel_size=7, stride=1, padding=3)", (2, 3, 2)),
    ("F.max_pool1d(a, kernel_size=4, stride=5, padding=2, dilation=3)", (1, 2, 9)),
])
def test_pools_over_short_padded_dims_match_eager(call, shape):
    # only the reachable window offsets are looped over; max and average (count_include_pad)
    # still agree with PyTorch where most offsets fall in the padding
    check(program(f"return {call}", [shape]))


def test_programs_past_int32_elements_index_in_int64():
    # 70000 x 40000 elements overflow int32 index arithmetic. The shapes come from the meta
    # device, so nothing of that size is allocated here.
    big = program("return torch.relu(a).sum(dim=-1)", [(70000, 40000)])
    small = program("return torch.relu(a).sum(dim=-1)", [(70, 40)])
    cuda = CompilerConfig(device="cuda")
    assert "tl.program_id(0).to(tl.int64)" in compile_program(big, cuda)
    assert ".to(tl.int64)" not in compile_program(small, cuda)


def test_contiguous_pointwise_loads_use_the_linear_index():
    # A same-shape contiguous read must stay visibly contiguous to Triton (coalesced, vectorised):
    # no div/mod index rebuild and no where() around the address. Broadcast reads keep the
    # general path.
    src = program("return torch.add(a, b) * c", [(6, 10), (6, 10), (10,)])
    candidate = check(src)
    assert "tl.load(in0_ptr + offs, mask=mask, other=0)" in candidate
    assert "tl.load(in1_ptr + offs, mask=mask, other=0)" in candidate
    assert "tl.load(in2_ptr + tl.where(mask" in candidate  # the broadcast (10,) operand


def test_a_product_with_a_zero_operand_made_in_forward_runs():
    """A short-K product whose operand is a constant (an RNN's zero initial state) rendered the
    constant as a Python literal with ``.to()``, and the candidate crashed at run time."""
    src = program("h = torch.zeros(a.size(0), 4, device=a.device)\n"
                  "return F.linear(h, self.lin.weight) + a", [(3, 6)],
                  init="self.lin = nn.Linear(4, 6)")
    check(src, capture="fx")


def test_a_nested_output_is_refused_naming_the_return():
    body = "return [a.relu(), a.sigmoid()], (a.tanh(),)"
    with pytest.raises(UnsupportedOperatorError, match="nested output") as err:
        compile_program(program(body, [(3, 4)]), CompilerConfig(device="cpu"))
    assert err.value.line > 0 and "return [" in str(err.value)
