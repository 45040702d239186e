"""Bad input and crashes (issue 23): every case ends with one plain line on stderr and a
non-zero exit, or with the documented behaviour; killed runs resume exactly and leave nothing
behind.

Most tests stay in this process and avoid the sandbox: the judge pool is replaced by
``FakePool`` where a test is about what a command does with the judge's answer, not about the
judge. The few that start sandboxes or kill a process say so.
"""

from __future__ import annotations

import importlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from typer.testing import CliRunner

from drtriton import scratch
from drtriton.cli import app
from drtriton.program import ProgramError, check_runs, load_program, make_inputs

runner = CliRunner()

OK = """import torch
import torch.nn as nn

class Model(nn.Module):
    def forward(self, x):
        return torch.relu(x)

def get_inputs():
    return INPUTS

def get_init_inputs():
    return []
"""
RAISES = OK.replace("return torch.relu(x)",
                    'raise RuntimeError("boom [enforce fail at alloc_cpu.cpp:127]")')
BAD = "# inputs that cannot be allocated"
HUGE = OK.replace("INPUTS", "[torch.randn(1 << 18, 1 << 16)]") + BAD + "\n"


def program(inputs: str = "[torch.randn(4, 4)]", source: str = OK) -> str:
    return source.replace("INPUTS", inputs)


def invoke(*args: object, **kwargs):
    return runner.invoke(app, [str(a) for a in args], **kwargs)


def one_error(result, code: int = 2) -> str:
    """The single stderr line of a failed command (and nothing on stdout)."""
    lines = result.stderr.splitlines()
    assert result.exit_code == code, result.output
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    assert result.stdout == "" and "Traceback" not in result.output
    return lines[0]


# ----------------------------------------------------------------------------- convert
def test_get_inputs_of_the_wrong_type_is_named():
    for inputs, kind in (('"abc"', "str"), ("5", "int"), ("{'x': 1}", "dict")):
        assert check_runs(program(inputs)) == {
            "problem": f"get_inputs() must return a list of inputs, got {kind}"}
        with pytest.raises(ProgramError, match="must return a list"):
            make_inputs(load_program(program(inputs)), 0, "cpu")
    assert check_runs(program()) == {}
    assert make_inputs(load_program(program("(torch.ones(2), 3)")), 0, "cpu")[1] == 3


def test_a_program_that_fails_on_its_own_is_named_so():
    raised = check_runs(program(source=RAISES))["problem"]
    assert raised == "forward() raised RuntimeError: boom [enforce fail at alloc_cpu.cpp:127]"
    too_big = check_runs(program("[torch.randn(1 << 40, 1 << 30)]"))["problem"]
    assert too_big.startswith("get_inputs() raised RuntimeError")


def fake_convert(monkeypatch, messages: list[str], code: int, write: bool = True):
    """Replace the convert command's body: it writes the candidate where it is told, says
    ``messages`` (``{out}`` names that path) and returns ``code``."""
    calls = []

    def convert(program, out, device, mode, echo, **_):
        calls.append(out)
        if write:
            Path(out).write_text("class ModelNew: ...\n")
        for message in messages:
            echo(message.format(out=out, program=program))
        return code

    monkeypatch.setattr("drtriton.commands.convert", convert)
    return calls


def test_convert_results_go_to_stdout_and_notes_to_stderr(tmp_path, monkeypatch):
    source, out = tmp_path / "p.py", tmp_path / "sub" / "p_triton.py"
    source.write_text(program())
    fake_convert(monkeypatch, ["note: kernels left autotuned: x", "wrote {out} (1 Triton kernels)",
                               "verdict: correct (max abs err 0)"], 0)
    result = invoke("convert", source, "-o", out, "--device", "cpu")
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines() == [f"wrote {out} (1 Triton kernels)",
                                          "verdict: correct (max abs err 0)"]
    assert result.stderr == "note: kernels left autotuned: x\n"
    assert out.read_text() == "class ModelNew: ...\n"


def test_convert_without_a_verdict_leaves_no_candidate(tmp_path, monkeypatch):
    source, out = tmp_path / "p.py", tmp_path / "p_triton.py"
    source.write_text(program())
    reason = ("{program}: reference: memory limit exceeded in reference get_inputs (trial 0): "
              "RuntimeError: [enforce fail at alloc_cpu.cpp:127] err == 0.")
    fake_convert(monkeypatch, ["wrote {out} (1 Triton kernels)", "error: " + reason], 2)
    line = one_error(invoke("convert", source, "-o", out, "--device", "cpu"))
    assert "[enforce fail at alloc_cpu.cpp:127] err == 0." in line  # brackets kept verbatim
    assert line.endswith("(no candidate written: it could not be verified)")
    assert not out.exists()


def test_convert_names_a_forward_that_raises(tmp_path, monkeypatch):
    source = tmp_path / "p.py"
    source.write_text(program(source=RAISES))
    fake_convert(monkeypatch, ["error: {program}: unsupported operator forward (cannot trace "
                               "forward(): RuntimeError: boom)"], 2, write=False)
    monkeypatch.setattr("drtriton.cli._program_problem",  # the sandboxed run, here in-process
                        lambda src, device, options: check_runs(src).get("problem"))
    line = one_error(invoke("convert", source, "--device", "cpu"))
    assert line == (f"error: {source}: forward() raised RuntimeError: "
                    "boom [enforce fail at alloc_cpu.cpp:127]")
    assert "unsupported operator" not in line and not (tmp_path / "p_triton.py").exists()


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without a GPU")
def test_convert_on_cuda_without_a_gpu_fails_before_any_work(tmp_path, monkeypatch):
    source = tmp_path / "p.py"
    source.write_text(program())
    calls = fake_convert(monkeypatch, [], 0)
    line = one_error(invoke("convert", source, "--device", "cuda"))
    assert "no CUDA GPU" in line and calls == [] and not (tmp_path / "p_triton.py").exists()


def test_convert_end_to_end_names_a_raising_forward_in_the_sandbox(tmp_path):
    """Starts sandboxes (about 10 s): the compile fails, the program is run in a sandbox."""
    source = tmp_path / "p.py"
    source.write_text(program(source=RAISES))
    line = one_error(invoke("convert", source, "--device", "cpu"))
    assert line == (f"error: {source}: forward() raised RuntimeError: "
                    "boom [enforce fail at alloc_cpu.cpp:127]")
    assert list(tmp_path.iterdir()) == [source]


@pytest.mark.slow
def test_convert_end_to_end_inputs_that_cannot_be_allocated(tmp_path):
    source = tmp_path / "p.py"
    source.write_text(HUGE)
    line = one_error(invoke("convert", source, "--device", "cpu"))
    assert "can't allocate memory" in line and "[enforce fail" in line
    assert list(tmp_path.iterdir()) == [source]


# ----------------------------------------------------------------------------- plain text
def test_square_brackets_are_printed_verbatim(tmp_path):
    weird = tmp_path / "x[/]y.py"
    assert one_error(invoke("convert", weird)) == f"error: program {weird} does not exist"
    line = one_error(invoke("bench", "--scale", "[bold]x[/]", "--out", tmp_path / "r.json"))
    assert "'[bold]x[/]' is not one of" in line
    missing = tmp_path / "[red]p.jsonl"
    line = one_error(invoke("bench", "--programs", missing, "--out", tmp_path / "r.json"))
    assert line == f"error: --programs file {missing} does not exist"


def test_a_long_error_stays_one_line(tmp_path):
    deep = tmp_path.joinpath(*["a_rather_long_folder_name"] * 6) / "programs.jsonl"
    line = one_error(invoke("bench", "--programs", deep, "--out", tmp_path / "r.json"))
    assert len(line) > 200  # not wrapped at 80 columns, though stderr is not a terminal


def test_usage_errors_are_one_line(tmp_path):
    line = one_error(invoke("synth", "--level", 1, "--num", 1, "--workers", "x", "--out", "p"))
    assert line.startswith("error: Invalid value for '--workers'")
    assert "No such command" in one_error(invoke("nosuch"))


# ----------------------------------------------------------------------------- output paths
@pytest.mark.parametrize("command", [
    ["synth", "--level", "1", "--num", "1", "--out", "{out}/p.jsonl"],
    ["pairs", "--programs", "{tmp}/p.jsonl", "--out", "{out}/pairs.jsonl"],
    ["init-model", "--out", "{out}/model"],
    ["sft", "--model", "{tmp}", "--pairs", "{tmp}/p.jsonl", "--out", "{out}/sft"],
    ["rl", "--model", "{tmp}", "--programs", "{tmp}/p.jsonl", "--out", "{out}/rl"],
])
def test_an_unwritable_out_is_refused_before_any_work(tmp_path, command):
    (tmp_path / "p.jsonl").write_text('{"source": "x"}\n')
    blocker = tmp_path / "file"
    blocker.write_text("")
    started = time.perf_counter()
    args = [a.format(tmp=tmp_path, out=blocker / "sub") for a in command]
    line = one_error(invoke(*args))
    assert line.startswith(f"error: cannot create directory {blocker / 'sub'}")
    assert f"{blocker} is not a directory" in line
    assert time.perf_counter() - started < 5  # checked first, not after the work


# ----------------------------------------------------------------------------- synth options
def test_synth_refuses_an_unknown_device_and_a_negative_start(tmp_path):
    out = tmp_path / "p.jsonl"
    line = one_error(invoke("synth", "--level", 1, "--num", 1, "--device", "tpu", "--out", out))
    assert line == "error: unknown device 'tpu'; choose cpu, cuda or cuda:N"
    line = one_error(invoke("synth", "--level", 1, "--num", 1, "--start-index", -5, "--out", out))
    assert "--start-index" in line
    assert not out.exists() and not out.with_name("p.jsonl.partial").exists()


# ----------------------------------------------------------------------------- bench input
@pytest.mark.parametrize("levels", ["0", "-1", "1000", "1,65"])
def test_bench_refuses_levels_out_of_range(tmp_path, levels):
    line = one_error(invoke("bench", "--levels", levels, "--out", tmp_path / "r.json"))
    assert "between 1 and 64" in line


@pytest.mark.parametrize("num", ["0", "-2"])
def test_bench_refuses_a_num_below_one(tmp_path, num):
    line = one_error(invoke("bench", "--num", num, "--out", tmp_path / "r.json"))
    assert "'--num'" in line and "greater than or equal to 1" in line
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("option, value, message", [
    ("--timing-budget-s", "0", "--timing-budget-s must be positive"),
    ("--generation-batch-size", "0", "greater than or equal to 1"),
])
def test_bench_refuses_judging_and_sampling_settings_out_of_range(tmp_path, option, value,
                                                                   message):
    line = one_error(invoke("bench", option, value, "--out", tmp_path / "r.json"))
    assert message in line
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("args, message", [
    (["--verify-fraction", "1.5"], "verify_fraction must be in (0, 1]"),
    (["--shape-notes", "--teacher", "openai:http://127.0.0.1:9#m"], "need the compiler"),
])
def test_pairs_refuses_settings_that_cannot_hold(tmp_path, args, message):
    programs = tmp_path / "p.jsonl"
    programs.write_text(json.dumps(stored_programs(1)[0]) + "\n")
    line = one_error(invoke("pairs", "--programs", programs, "--out", tmp_path / "o.jsonl",
                            "--device", "cpu", *args))
    assert message in line and not (tmp_path / "o.jsonl").exists()


def stored_programs(n: int = 2) -> list[dict]:
    from drtriton.synth import SynthConfig, synthesize

    return [json.loads(p.to_json()) for p in synthesize(SynthConfig(1, n, seed=3))]


@pytest.mark.parametrize("content, message", [
    ("", "no programs at levels 1 (the file has none)"),
    ('{"source": "x"}\n', ":1: not a synthesized program (no id, level"),
    ("PROGRAM\n{not json\n", ":2: not JSON"),
])
def test_bench_reports_a_bad_programs_file_in_one_line(tmp_path, content, message):
    path = tmp_path / "programs.jsonl"
    path.write_text(content.replace("PROGRAM", json.dumps(stored_programs(1)[0])))
    line = one_error(invoke("bench", "--programs", path, "--levels", 1, "--out",
                            tmp_path / "r.json"))
    assert line.startswith(f"error: {path}") and message in line


def test_bench_refuses_a_directory_and_an_unknown_scale(tmp_path):
    line = one_error(invoke("bench", "--programs", tmp_path, "--out", tmp_path / "r.json"))
    assert line == f"error: --programs file {tmp_path} is a directory; give a file"
    line = one_error(invoke("bench", "--scale", "huge", "--out", tmp_path / "r.json"))
    assert "'huge' is not one of 'small', 'gpu'" in line


# ----------------------------------------------------------------------------- bad programs
class FakePool:
    """A judge pool that runs the compiler's sandboxed step in this process and fails the
    reference of a program marked ``BAD``, as a sandboxed reference run that cannot allocate
    its inputs does."""

    judged: list[str] = []

    def __init__(self, config, workers=None) -> None:
        self.config, self.size = config, 1

    def __enter__(self) -> FakePool:
        return self

    def __exit__(self, *exc) -> None:
        pass

    def call(self, source, function, arguments, phase, gated=False) -> dict:
        module, _, name = function.partition(":")
        return getattr(importlib.import_module(module), name)(source, **arguments)

    def verify(self, reference: str, candidate: str):
        from drtriton.judge import InvalidReferenceError, Verdict

        FakePool.judged.append(reference)
        if BAD in reference:
            raise InvalidReferenceError("reference: memory limit exceeded in reference "
                                        "get_inputs (trial 0): RuntimeError: can't allocate")
        return Verdict("correct")

    def verify_many(self, pairs) -> list:
        return [self.verify(r, c) for r, c in pairs]

    def verify_groups(self, groups) -> list:
        from drtriton.program import ProgramError

        found = []
        for reference, candidates in groups:
            try:
                found.append([self.verify(reference, c) for c in candidates])
            except ProgramError as exc:
                found.append(exc)
        return found


@pytest.fixture
def fake_judge(monkeypatch):
    FakePool.judged = []
    monkeypatch.setattr("drtriton.judge.JudgePool", FakePool)
    return FakePool


def programs_with_a_bad_one(tmp_path) -> Path:
    rows = stored_programs(2)
    rows[0] |= {"source": HUGE, "id": "bad0000000000000"}
    path = tmp_path / "programs.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_a_bad_program_is_a_bench_row_and_a_rerun_skips_it(tmp_path, fake_judge):
    out = tmp_path / "r.json"
    args = ("bench", "--programs", programs_with_a_bad_one(tmp_path), "--levels", 1, "--num", 2,
            "--device", "cpu", "--out", out)
    first = invoke(*args)
    assert first.exit_code == 0, first.output
    rows = [json.loads(line) for line in (tmp_path / "r.json.rows.jsonl").read_text().splitlines()]
    bad = [r for r in rows if r["id"].endswith("bad0000000000000")]
    assert len(rows) == 2 and len(bad) == 1 and bad[0]["status"] == "invalid_reference"
    assert "can't allocate" in bad[0]["reason"]
    assert f"report: {out}" in first.stdout and "report:" not in first.stderr
    judged = len(fake_judge.judged)
    again = invoke(*args)
    assert again.exit_code == 0 and len(fake_judge.judged) == judged  # nothing judged again
    assert len((tmp_path / "r.json.rows.jsonl").read_text().splitlines()) == 2


def test_bench_creates_the_folder_of_its_report(tmp_path, fake_judge):
    out = tmp_path / "new" / "deeper" / "r.json"
    result = invoke("bench", "--programs", programs_with_a_bad_one(tmp_path), "--levels", 1,
                    "--num", 2, "--device", "cpu", "--out", out)
    assert result.exit_code == 0, result.output
    assert (out.parent / "r.json.rows.jsonl").exists() and out.exists()


def test_a_bad_program_is_skipped_by_pairs(tmp_path, fake_judge):
    out = tmp_path / "pairs.jsonl"
    result = invoke("pairs", "--programs", programs_with_a_bad_one(tmp_path), "--out", out,
                    "--device", "cpu")
    assert result.exit_code == 0, result.output
    assert "skipped program bad0000000000000: reference: memory limit" in result.stderr
    assert len(out.read_text().splitlines()) == 1
    assert "invalid_program=1" in result.stdout and "wrote 1 verified pairs" in result.stdout


def test_pairs_resumes_a_run_cut_short_without_repeating_a_pair(tmp_path, fake_judge):
    programs, out = stored_programs(3), tmp_path / "pairs.jsonl"
    path = tmp_path / "programs.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in programs))
    args = ("pairs", "--programs", path, "--out", out, "--device", "cpu")
    assert invoke(*args).exit_code == 0
    first, judged = out.read_text(), len(fake_judge.judged)
    assert len(first.splitlines()) == 3
    again = invoke(*args)  # all finished: nothing judged again, the same pairs
    assert again.exit_code == 0 and len(fake_judge.judged) == judged and out.read_text() == first
    assert "wrote 3 verified pairs" in again.stdout
    ledger = tmp_path / "pairs.jsonl.programs.jsonl"
    lines = ledger.read_text().splitlines()
    ledger.write_text("\n".join(lines[:-1]) + "\n" + lines[-1][:9])  # cut in its last record
    assert invoke(*args).exit_code == 0
    assert len(fake_judge.judged) == judged + 1  # only the unfinished program again
    assert sorted(out.read_text().splitlines()) == sorted(first.splitlines())


def test_pairs_judges_only_the_sample_it_is_asked_to(tmp_path, fake_judge):
    from drtriton.train.pairs import PairsConfig, in_sample, run_pairs

    programs, out = stored_programs(6), tmp_path / "pairs.jsonl"
    path = tmp_path / "programs.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in programs))
    counts = run_pairs(PairsConfig(str(path), str(out), device="cpu", verify_fraction=0.5))
    sampled = [in_sample(r["id"], 0.5) for r in programs]
    assert 0 < sum(sampled) < 6  # the fixture's ids give a mixed sample
    pairs = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(fake_judge.judged) == sum(sampled) and len(pairs) == 6
    assert [p["verdict"] is None for p in pairs] == [not s for s in sampled]
    assert counts["unverified"] == 6 - sum(sampled) and counts["correct"] == sum(sampled)
    with pytest.raises(ValueError, match="verify_fraction"):
        PairsConfig(str(path), str(out), verify_fraction=0.0).validate()
    with pytest.raises(ValueError, match="compiler as teacher"):
        PairsConfig(str(path), str(out), teacher="openai:u#m", verify_fraction=0.5).validate()


def test_a_cpu_writes_a_gpus_unjudged_pairs_and_leaves_the_sample(tmp_path, fake_judge):
    from drtriton.train.pairs import PairsConfig, in_sample, run_pairs

    programs, out = stored_programs(6), tmp_path / "pairs.jsonl"
    path = tmp_path / "programs.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in programs))
    sampled = {r["id"] for r in programs if in_sample(r["id"], 0.5)}
    assert 0 < len(sampled) < 6
    config = PairsConfig(str(path), str(out), device="cpu", verify_fraction=0.5,
                         target="cuda", unjudged_only=True, compile_workers=1)
    counts = run_pairs(config)
    pairs = [json.loads(line) for line in out.read_text().splitlines()]
    assert fake_judge.judged == [] and counts["left_to_judge"] == len(sampled)
    assert {p["program_id"] for p in pairs} == {r["id"] for r in programs} - sampled
    assert all("device: cuda" in p["answer"] and p["verdict"] is None for p in pairs)
    counts = run_pairs(PairsConfig(str(path), str(out), device="cpu", verify_fraction=0.5))
    assert len(fake_judge.judged) == len(sampled) and "left_to_judge" not in counts
    assert counts["correct"] == len(sampled) and counts["unverified"] == 6 - len(sampled)
    with pytest.raises(ValueError, match="cannot be judged on cpu"):
        run_pairs(PairsConfig(str(path), str(out), device="cpu", verify_fraction=0.5,
                              target="cuda"))
    with pytest.raises(ValueError, match="verify_fraction below 1"):
        PairsConfig(str(path), str(out), unjudged_only=True).validate()


def test_pairs_keep_the_teachers_failures_in_the_programs_record(tmp_path, fake_judge,
                                                                 monkeypatch):
    from drtriton.judge import Verdict
    from drtriton.train.pairs import PairsConfig, run_pairs

    programs = stored_programs(2)
    path, out = tmp_path / "programs.jsonl", tmp_path / "pairs.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in programs))
    wrong = programs[1]["source"]
    monkeypatch.setattr(fake_judge, "verify", lambda self, r, c: Verdict(
        "incorrect", "output 0: max_abs_err 3.0") if r == wrong else Verdict("correct"))
    counts = run_pairs(PairsConfig(str(path), str(out), device="cpu"))
    assert counts["correct"] == 1 and counts["incorrect"] == 1 and "failures" not in counts
    ledger = [json.loads(x) for x in (tmp_path / "pairs.jsonl.programs.jsonl").read_text()
              .splitlines()]
    assert "failures" not in ledger[0]["counts"]
    assert ledger[1]["counts"]["failures"] == [
        {"answer": 0, "status": "incorrect", "reason": "output 0: max_abs_err 3.0"}]
    assert run_pairs(PairsConfig(str(path), str(out), device="cpu")) == counts  # on resume too


# ----------------------------------------------------------------------------- training
def test_sft_refuses_batch_size_zero_before_creating_its_folder(tmp_path):
    (tmp_path / "p.jsonl").write_text('{"source": "x", "answer": "y"}\n')
    out = tmp_path / "sft"
    line = one_error(invoke("sft", "--model", tmp_path, "--pairs", tmp_path / "p.jsonl",
                            "--out", out, "--batch-size", 0))
    assert "'--batch-size'" in line and not out.exists()


def test_rl_resume_says_what_there_is_to_resume(tmp_path):
    (tmp_path / "p.jsonl").write_text('{"source": "x"}\n')
    args = ("rl", "--model", tmp_path, "--programs", tmp_path / "p.jsonl", "--resume", "--out")
    line = one_error(invoke(*args, tmp_path / "none"))
    assert "holds no run to resume" in line and not (tmp_path / "none").exists()
    started = tmp_path / "started"  # killed before its first checkpoint
    started.mkdir()
    (started / "metrics.jsonl").write_text('{"step": 1}\n')
    result = invoke(*args, started)  # goes on to the model check, which fails here
    lines = result.stderr.splitlines()
    assert lines[0].startswith("warning: --resume:") and "starting again from step 0" in lines[0]
    assert result.exit_code == 2 and "not a model directory" in lines[1]


def test_rl_resume_keeps_each_step_once(tmp_path):
    from drtriton.train.rl import _truncate_metrics

    metrics = tmp_path / "metrics.jsonl"
    rows = [json.dumps({"step": s}) for s in (1, 2, 3)]
    metrics.write_text("\n".join(rows) + '\n{"step": 4, "lo')  # killed while writing step 4
    _truncate_metrics(metrics, 2, {"step": 2})
    assert metrics.read_text().splitlines() == rows[:2]
    metrics.write_text(rows[0] + "\n")  # killed after saving step 2, before appending its row
    _truncate_metrics(metrics, 2, {"step": 2, "loss": 0.5})
    assert [json.loads(x) for x in metrics.read_text().splitlines()] == [
        {"step": 1}, {"step": 2, "loss": 0.5}]
    _truncate_metrics(metrics, 0)  # --resume with no checkpoint: every step is run again
    assert metrics.read_text() == ""


# ----------------------------------------------------------------------------- help texts
def test_help_gives_allowed_values_and_ranges():
    def text(*args):
        return " ".join(invoke(*args, "--help").stdout.replace("│", " ").split())

    assert "cpu, cuda or cuda:N" in text("synth") and "1..64" in text("synth")
    bench = text("bench")
    assert "1..64" in bench and "x>=1" in bench and "small|gpu" in bench
    for command in ("bench", "convert", "verify"):
        assert "correctness trials" in text(command)


# ----------------------------------------------------------------------------- synth resume
def synth_args(out: Path, *extra: object) -> list[object]:
    return ["synth", "--level", 1, "--num", 4, "--seed", 5, "--out", out, *extra]


def test_synth_resumes_an_interrupted_run_byte_for_byte(tmp_path):
    full, out = tmp_path / "full.jsonl", tmp_path / "s.jsonl"
    assert invoke(*synth_args(full)).exit_code == 0
    lines = full.read_bytes().splitlines(keepends=True)
    partial = out.with_name("s.jsonl.partial")
    partial.write_bytes(lines[0] + lines[1] + lines[2][:40])  # killed mid-line
    result = invoke(*synth_args(out))
    assert result.exit_code == 0, result.output
    assert "resuming: 2 of 4 programs" in result.stderr and "wrote 4" in result.stdout
    assert out.read_bytes() == full.read_bytes() and not partial.exists()


def test_synth_never_overwrites_the_partial_file_of_another_run(tmp_path):
    out = tmp_path / "s.jsonl"
    partial = out.with_name("s.jsonl.partial")
    assert invoke(*synth_args(partial)).exit_code == 0  # the finished programs of seed 5
    kept = partial.read_bytes()
    line = one_error(invoke("synth", "--level", 1, "--num", 4, "--seed", 6, "--out", out))
    assert "holds programs of another run" in line and "seed 5" in line
    assert partial.read_bytes() == kept and not out.exists()


def descendants(pid: int) -> list[int]:
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            children.setdefault(int(stat[stat.rindex(")") + 2:].split()[1]), []).append(
                int(entry.name))
    found, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def running(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat[stat.rindex(")") + 2] != "Z"


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_synth_killed_leaves_no_process_and_resumes_exactly(tmp_path):
    """Kills a real ``synth --workers 2`` with SIGKILL (about 8 s)."""
    out, reference = tmp_path / "s.jsonl", tmp_path / "reference.jsonl"
    partial = out.with_name("s.jsonl.partial")
    command = ["synth", "--level", "20", "--num", "6", "--seed", "4", "--out"]
    child = subprocess.Popen([sys.executable, "-m", "drtriton.cli", *command, str(out),
                              "--workers", "2"], stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 60
    while not (partial.exists() and partial.read_bytes().count(b"\n") >= 1):
        assert time.monotonic() < deadline and child.poll() is None
        time.sleep(0.02)
    workers = descendants(child.pid)
    assert len(workers) >= 2  # the workers (and the resource tracker)
    os.kill(child.pid, signal.SIGKILL)
    child.wait()
    deadline = time.monotonic() + 10
    while any(running(p) for p in workers) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not [p for p in workers if running(p)]
    finished = partial.read_bytes()
    assert invoke(*command, out).exit_code == 0  # the same command, run again
    assert invoke(*command, reference).exit_code == 0  # one uninterrupted run
    kept = finished[:finished.rindex(b"\n") + 1]
    assert out.read_bytes().startswith(kept) and out.read_bytes() == reference.read_bytes()


# ----------------------------------------------------------------------------- scratch
def dead_pid() -> int:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def test_scratch_removes_only_the_directories_of_dead_owners(tmp_path):
    def sibling(name: str, owner: str | None) -> Path:
        path = tmp_path / name
        path.mkdir()
        if owner is not None:
            (path / scratch.OWNER_FILE).write_text(owner)
        return path

    dead = sibling("drtriton-judge-dead", f"{dead_pid()} 1")
    reused = sibling("drtriton-judge-reused", f"{os.getpid()} 1")  # a pid given to another
    live = sibling("drtriton-judge-live", scratch._identity(os.getpid()))
    fresh = sibling("drtriton-judge-fresh", None)  # its owner has not written the file yet
    other = sibling("drtriton-tune-dead", f"{dead_pid()} 1")
    mine = Path(scratch.claim_scratch(tmp_path, "drtriton-judge-"))
    assert mine.parent == tmp_path and mine.name.startswith("drtriton-judge-")
    assert (mine / scratch.OWNER_FILE).read_text() == scratch._identity(os.getpid())
    assert not dead.exists() and not reused.exists()
    assert live.exists() and fresh.exists() and other.exists()
    scratch.claim_scratch(tmp_path, "drtriton-judge-")
    assert mine.exists()  # a live run's directory stays


# ----------------------------------------------------------------------------- row files
def test_a_truncated_last_row_is_dropped_with_a_warning(tmp_path):
    from drtriton.bench.rows import load_rows

    path = tmp_path / "rows.jsonl"
    path.write_text('{"id": "a"}\n{"id": "b"}\n{"id": "c", "sta')
    rows, warning = load_rows(path, repair=True)
    assert [r["id"] for r in rows] == ["a", "b"] and f"{path}:3: dropped" in warning
    assert path.read_text() == '{"id": "a"}\n{"id": "b"}\n'  # the next row starts a line
    path.write_text('{"id": "a"}\n{oops\n{"id": "b"}\n')
    with pytest.raises(ValueError, match=":2: not a JSON row"):
        load_rows(path)
    assert load_rows(tmp_path / "none.jsonl") == ([], None)


def test_a_bench_rerun_goes_past_a_truncated_row(tmp_path, fake_judge):
    out = tmp_path / "r.json"
    programs = tmp_path / "programs.jsonl"
    programs.write_text("".join(json.dumps(r) + "\n" for r in stored_programs(2)))
    args = ("bench", "--programs", programs, "--levels", 1, "--num", 2, "--device", "cpu",
            "--out", out)
    assert invoke(*args).exit_code == 0
    rows_path = tmp_path / "r.json.rows.jsonl"
    rows = rows_path.read_text()
    rows_path.write_text(rows + rows.splitlines()[0][:30])  # a rerun killed mid-row
    judged = len(fake_judge.judged)
    again = invoke(*args)
    assert again.exit_code == 0, again.output
    assert again.stderr.startswith(f"warning: {rows_path}:3: dropped a truncated last row")
    assert rows_path.read_text() == rows and len(fake_judge.judged) == judged
    assert len(json.loads(out.read_text())["rows"]) == 2


RNN_TANH = '''import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.rnn = nn.RNN(4, 6, batch_first=True)

    def forward(self, x):
        return self.rnn(x)[0]


def get_inputs():
    return [torch.randn(2, 5, 4)]


def get_init_inputs():
    return []
'''


def test_convert_capture_option_chooses_the_front_end(tmp_path):
    """``nn.RNN`` has no lowering of its own: fx alone refuses it in one line, the default
    (fx, then torch.export) converts its decomposition and the judge finds it correct."""
    source, out = tmp_path / "rnn.py", tmp_path / "rnn_triton.py"
    source.write_text(RNN_TANH)
    line = one_error(invoke("convert", source, "-o", out, "--device", "cpu", "--capture", "fx"))
    assert "unsupported operator" in line and not out.exists()
    result = invoke("convert", source, "-o", out, "--device", "cpu")
    assert result.exit_code == 0, result.output
    assert "verdict: correct" in result.stdout and out.exists()
