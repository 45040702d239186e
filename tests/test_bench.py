"""Benchmark suite: KernelBench metrics, loaders, and an end-to-end CPU run that resumes."""

import json
import math

import pytest
from typer.testing import CliRunner

from drtriton.bench import fast_p, geomean_speedup, kernelbench_problems, replace_block, summarize
from drtriton.cli import app


def _row(status, eager=None, compile_=None, level=1):
    return {"status": status, "speedup_eager": eager, "speedup_compile": compile_, "level": level}


ROWS = [
    _row("correct", 2.0, 0.5),
    _row("correct", 1.2, 1.1),
    _row("correct", 0.8, 0.4),
    _row("incorrect"),
    _row("no_candidate"),
]


def test_fast_p_counts_all_problems_in_the_denominator():
    assert fast_p(ROWS, "speedup_eager", 0.0) == 3 / 5  # fast_0 = accuracy
    assert fast_p(ROWS, "speedup_eager", 1.0) == 2 / 5
    assert fast_p(ROWS, "speedup_eager", 1.5) == 1 / 5
    assert fast_p(ROWS, "speedup_eager", 2.0) == 0.0  # strictly faster than 2x
    assert fast_p(ROWS, "speedup_compile", 1.0) == 1 / 5


def test_geomean_over_correct_problems():
    assert geomean_speedup(ROWS, "speedup_eager") == pytest.approx(
        math.exp((math.log(2.0) + math.log(1.2) + math.log(0.8)) / 3)
    )


def test_untimed_rows_have_accuracy_only():
    rows = [_row("correct"), _row("incorrect")]
    s = summarize(rows)
    assert s["accuracy"] == 0.5 and s["fast_0_eager"] == 0.5
    assert s["fast_1_eager"] is None and s["geomean_eager"] is None


def test_search_gain_compares_with_the_whole_candidate_of_the_same_run():
    rows = [
        # raw times say 2x; side by side with eager (what counts) the chosen program is 0.5x
        _row("correct", eager=2.0)
        | {
            "runtime_ms": 1.0,
            "whole_status": "correct",
            "whole_runtime_ms": 2.0,
            "whole_speedup_eager": 4.0,
        },
        _row("correct", eager=2.0)
        | {
            "runtime_ms": 1.0,
            "whole_status": "correct",
            "whole_runtime_ms": 1.0,
            "whole_speedup_eager": 2.0,
        },
        _row("correct", eager=3.0)
        | {"runtime_ms": 3.0, "whole_status": "incorrect", "whole_runtime_ms": None},
        _row("incorrect") | {"runtime_ms": None, "whole_status": "incorrect"},
    ]
    s = summarize(rows)
    assert s["search_gain_geomean"] == pytest.approx(0.5**0.5)  # 0.5x and 1x (raw times: 2x and 1x)
    assert s["search_gain_problems"] == 2 and s["rescued_by_search"] == 1
    assert "search_gain_geomean" not in summarize(ROWS)  # rows without search say nothing


def test_report_csv_takes_rows_with_different_columns(tmp_path):
    from drtriton.bench import BenchConfig, write_report

    rows = [
        _row("correct", 1.0, 1.0) | {"id": "a"},
        _row("incorrect") | {"id": "b", "env": {"x": 1}},
    ]
    write_report(BenchConfig(), rows, tmp_path / "r.json", {})
    header = (tmp_path / "r.csv").read_text().splitlines()[0]
    assert header.endswith("id,env")


def test_kernelbench_loader_orders_problems_numerically(tmp_path):
    folder = tmp_path / "KernelBench" / "level2"
    folder.mkdir(parents=True)
    for name in ("10_b.py", "2_a.py", "1_c.py"):
        (folder / name).write_text("# problem\n")
    problems = kernelbench_problems(tmp_path, [2])
    assert [p.id for p in problems] == ["L2-1_c", "L2-2_a", "L2-10_b"]
    assert kernelbench_problems(tmp_path, [2], limit=2)[-1].id == "L2-2_a"
    with pytest.raises(FileNotFoundError, match="level3"):
        kernelbench_problems(tmp_path / "KernelBench" / "level2" / "missing", [3])


def test_readme_block_replacement():
    text = "a\n<!-- bench:x -->\nold\n<!-- /bench:x -->\nb"
    assert replace_block(text, "x", "new") == "a\n<!-- bench:x -->\nnew\n<!-- /bench:x -->\nb"
    with pytest.raises(ValueError):
        replace_block(text, "y", "new")


def test_bench_cli_end_to_end_and_resume(tmp_path):
    runner = CliRunner()
    out = tmp_path / "report.json"
    args = ["bench", "--levels", "1", "--num", "2", "--device", "cpu", "--out", str(out)]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    # not a terminal: a log line as each problem starts and ends (a bar would print nothing)
    assert result.output.count("start L1-") == 2 and result.output.count("done  L1-") == 2
    report = json.loads(out.read_text())
    assert report["summary"]["all"]["problems"] == 2
    assert report["summary"]["all"]["accuracy"] is not None
    assert report["config"]["seed"] == 1_000_003  # held-out seed
    assert "torch" in report["machine"] and report["judge_environment"]
    rows_file = tmp_path / "report.json.rows.jsonl"
    assert len(rows_file.read_text().splitlines()) == 2
    again = runner.invoke(app, args)  # resumes: nothing is judged again
    assert again.exit_code == 0
    assert len(rows_file.read_text().splitlines()) == 2
    assert (tmp_path / "report.csv").exists()
    # a row judged under other judge settings (here: before the compile baseline was checked)
    # is judged again, and the report keeps the new row only
    stale, fresh = map(json.loads, rows_file.read_text().splitlines())
    del stale["env"]["compile_baseline"]
    rows_file.write_text(json.dumps(stale) + "\n" + json.dumps(fresh) + "\n")
    third = runner.invoke(app, args)
    assert third.exit_code == 0, third.output
    lines = [json.loads(line) for line in rows_file.read_text().splitlines()]
    assert [r["id"] for r in lines] == [stale["id"], fresh["id"], stale["id"]]
    assert lines[-1]["env"]["compile_baseline"] == "checked"
    assert json.loads(out.read_text())["summary"]["all"]["problems"] == 2


def test_bench_cli_rejects_bad_input(tmp_path):
    runner = CliRunner()
    r = runner.invoke(app, ["bench", "--suite", "kernelbench", "--out", str(tmp_path / "r.json")])
    assert r.exit_code == 2 and "KernelBench checkout" in r.output
    r = runner.invoke(app, ["bench", "--levels", "a,b", "--out", str(tmp_path / "r.json")])
    assert r.exit_code == 2 and "comma-separated" in r.output


def test_training_refuses_held_out_benchmark_programs(tmp_path):
    from drtriton.bench import HELD_OUT_SEED
    from drtriton.synth import SynthConfig, synthesize, write_jsonl
    from drtriton.train.pairs import read_programs

    path = tmp_path / "p.jsonl"
    write_jsonl(synthesize(SynthConfig(level=1, num=1, seed=HELD_OUT_SEED)), path)
    with pytest.raises(ValueError, match="held-out benchmark seed"):
        read_programs(path)
    write_jsonl(synthesize(SynthConfig(level=1, num=1, seed=7)), path)
    assert len(read_programs(path)) == 1


class _CompilerServer:
    """A local OpenAI-compatible endpoint whose 'model' answers with the built-in compiler."""

    def __enter__(self):
        import re
        import threading
        from http.server import BaseHTTPRequestHandler, HTTPServer

        from drtriton.policy import CompilerPolicy

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                prompt = body["messages"][-1]["content"]
                program = re.search(r"```python\n(.*?)```", prompt, re.S).group(1)
                answer = CompilerPolicy().answer(program)
                data = json.dumps(
                    {"choices": [{"message": {"content": answer}}] * body.get("n", 1)}
                )
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.end_headers()
                self.wfile.write(data.encode())

            def log_message(self, *args):
                pass

        self.server = HTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return f"http://127.0.0.1:{self.server.server_port}/v1"

    def __exit__(self, *exc):
        self.server.shutdown()


def test_bench_with_an_openai_compatible_policy(tmp_path):
    from drtriton.bench import BenchConfig, run_bench

    with _CompilerServer() as url:
        config = BenchConfig(levels=(1,), num=2, device="cpu", policy=f"openai:{url}#fake")
        report = run_bench(config, tmp_path / "r.json")
    assert report["summary"]["all"]["accuracy"] == 1.0
    assert report["config"]["policy"].startswith("openai:")


def test_pairs_names_its_teacher_as_bench_names_its_policy(tmp_path):
    from drtriton.synth import SynthConfig, synthesize, write_jsonl

    programs, out = tmp_path / "p.jsonl", tmp_path / "pairs.jsonl"
    write_jsonl(synthesize(SynthConfig(level=1, num=1, seed=7)), programs)
    base = ["pairs", "--programs", str(programs), "--out", str(out), "--device", "cpu"]
    with _CompilerServer() as url:
        spec = f"openai:{url}#fake"
        result = CliRunner().invoke(app, [*base, "--teacher", spec, "--samples", "2"])
    assert result.exit_code == 0, result.output
    (pair,) = [json.loads(line) for line in out.read_text().splitlines()]
    assert pair["teacher"] == spec and pair["verdict"]["status"] == "correct"
    bad = CliRunner().invoke(app, [*base, "--teacher", "openai"])
    assert bad.exit_code == 2 and "--teacher: unknown policy 'openai'" in bad.output
    gone = CliRunner().invoke(app, [*base, "--openai-url", url])
    assert gone.exit_code == 2 and "--openai-url" in gone.output


def test_bench_loads_an_llm_policy_once(tmp_path, monkeypatch):
    """Regression: the bench loaded its policy for every problem, so an ``hf:`` checkpoint was
    read from disk again (and held once more in memory) per problem."""
    import drtriton.policy
    from drtriton.bench import BenchConfig, run_bench
    from drtriton.policy import CompilerPolicy, Policy

    loads, calls = [], []

    class CountedPolicy(Policy):
        batches = True  # a local model: every problem's answer drawn ahead, in one batch

        def generate(self, sources, n, sampling):
            calls.append(len(sources))
            return [[CompilerPolicy().answer(s)] * n for s in sources]

    def load(spec, device="cpu", mode="strict", precision="fp32", sampling=None, batch_size=4):
        loads.append((spec, batch_size))
        return CountedPolicy()

    monkeypatch.setattr(drtriton.policy, "load_policy", load)
    config = BenchConfig(levels=(1,), num=2, device="cpu", policy="hf:/some/checkpoint")
    report = run_bench(config, tmp_path / "r.json")
    assert report["summary"]["all"]["accuracy"] == 1.0
    assert loads == [("hf:/some/checkpoint", config.generation_batch_size)]
    assert calls == [2]  # both problems' answers in one generate call, none per problem


def test_bench_with_a_policy_that_cannot_load_fails_before_judging(tmp_path):
    from drtriton.bench import BenchConfig, run_bench

    config = BenchConfig(levels=(1,), num=1, device="cpu", policy="hf:/no/such/checkpoint")
    with pytest.raises(FileNotFoundError, match="no model directory /no/such/checkpoint"):
        run_bench(config, tmp_path / "r.json")
    assert not (tmp_path / "r.json.rows.jsonl").read_text()  # no row judged without a policy


def test_search_generator_keeps_parsable_answers():
    from drtriton.policy import Policy

    good = "```python\nimport torch\n\n\nclass ModelNew(torch.nn.Module):\n    pass\n```"

    class Stub(Policy):
        def generate(self, sources, n, sampling):
            return [[good, "no code here", good][:n] for _ in sources]

    assert len(Stub().search_generator(3)("ignored")) == 2


def test_policy_specs():
    from drtriton.policy import parse_policy_spec

    assert parse_policy_spec("compiler") == ("compiler", ())
    assert parse_policy_spec("hf:/m") == ("hf", ("/m",))
    assert parse_policy_spec("openai:http://h:8000/v1#qwen") == (
        "openai",
        ("http://h:8000/v1", "qwen"),
    )
    with pytest.raises(ValueError, match="unknown policy"):
        parse_policy_spec("gpt")


def test_bench_with_search_on_cpu_keeps_a_resumable_verdict_cache(tmp_path):
    import sqlite3

    out = tmp_path / "search.json"
    args = ["bench", "--levels", "1", "--num", "1", "--device", "cpu", "--search",
            "--max-fragment-ops", "2", "--out", str(out)]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    (row,) = json.loads(out.read_text())["rows"]
    assert row["status"] == "correct" and row["chosen"] in ("whole", "composed")
    assert row["whole_status"] == "correct" and row["candidates_judged"] >= 1
    cache = tmp_path / "search.json.search.sqlite"  # the default: beside the report
    with sqlite3.connect(cache) as db:
        (stored,) = db.execute("select count(*) from verdicts").fetchone()
    assert stored == row["candidates_judged"]  # every verdict of the search, for a resumed run


def test_reference_filters_wait_for_fx_tracing():
    """Regression: the filters run a reference eagerly in the bench's process; a candidate traced
    by another thread at the same time (torch.fx patches Module.__call__ globally) broke them on
    the H200 (NameError in one run, another reason in the next). They take TORCH_STATE_LOCK."""
    import threading

    from drtriton.bench.run import run_filters
    from drtriton.program import TORCH_STATE_LOCK
    from drtriton.synth import SynthConfig, synthesize

    (record,) = synthesize(SynthConfig(level=2, num=1, seed=3))
    result = []
    with TORCH_STATE_LOCK:
        worker = threading.Thread(target=lambda: result.append(run_filters(record, "cpu")))
        worker.start()
        worker.join(timeout=1.0)
        assert worker.is_alive() and not result  # blocked while a trace holds the lock
    worker.join(timeout=60)
    assert result == [None]  # then it runs, and the program passes


def test_filter_errors_carry_their_message():
    from drtriton.synth import SynthConfig, check_program, synthesize

    (record,) = synthesize(SynthConfig(level=1, num=1, seed=3))
    broken = record.__class__(
        **{
            **record.__dict__,
            "source": record.source.replace("def forward(self, ", "def forward(self, y, "),
        }
    )
    reason = check_program(broken, "run")
    assert reason.startswith("error:TypeError: ") and "forward()" in reason, reason


def _benchmark_script(name: str):
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[1] / "benchmarks" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_level20_sample_keeps_the_first_valid_programs_in_index_order(tmp_path):
    """benchmarks/gpu_filter.py keep: the first N programs whose GPU filter passed, in pool order,
    and no sample while a program before the last one kept is still unchecked."""
    from drtriton.synth import SynthConfig, read_jsonl, synthesize, write_jsonl

    pool = tmp_path / "pool.jsonl"
    write_jsonl(synthesize(SynthConfig(level=1, num=5, seed=3)), pool)
    ids = [p.id for p in read_jsonl(pool)]
    log = tmp_path / "log.jsonl"
    reasons = [None, "unused_input", None, None, "constant_output"]
    log.write_text(
        "".join(
            json.dumps({"id": i, "reason": r}) + "\n" for i, r in zip(ids, reasons, strict=True)
        )
    )
    out = tmp_path / "sample.jsonl"
    script = _benchmark_script("gpu_filter")
    script.keep(pool, [log], 2, out)
    assert [p.id for p in read_jsonl(out)] == [ids[0], ids[2]]
    script.keep(pool, [log], 9, out)  # fewer valid than asked: all of them
    assert [p.id for p in read_jsonl(out)] == [ids[0], ids[2], ids[3]]
    log.write_text("".join(json.dumps({"id": i, "reason": None}) + "\n" for i in (ids[0], ids[2])))
    with pytest.raises(SystemExit, match="unchecked"):  # ids[1] unchecked, before a kept one
        script.keep(pool, [log], 2, out)


def test_pairs_writes_every_verified_compiler_variant(tmp_path):
    """Teacher data whose correct answers differ: the compiler's distinct translations of one
    program (fusion cut short on the CPU; tiles, warps and stages too on a GPU)."""
    from compiler_cases.harness import program

    source = program("return torch.relu(torch.matmul(a, b)) * 2 + 1", [(8, 12), (12, 6)])
    programs, out = tmp_path / "p.jsonl", tmp_path / "pairs.jsonl"
    programs.write_text(json.dumps({"id": "p0", "level": 2, "source": source}) + "\n")
    base = ["pairs", "--programs", str(programs), "--out", str(out), "--device", "cpu"]
    result = CliRunner().invoke(app, [*base, "--variants", "3"])
    assert result.exit_code == 0, result.output
    pairs = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(pairs) >= 2 and len({p["answer"] for p in pairs}) == len(pairs)
    assert sorted(p["variant"] for p in pairs) == list(range(len(pairs)))
    assert all(p["verdict"]["status"] == "correct" for p in pairs)
    refused = CliRunner().invoke(app, [*base, "--variants", "2", "--teacher", "openai:u#m"])
    assert refused.exit_code == 2 and "--variants needs the compiler" in refused.output


def test_pairs_compiles_variants_in_processes_as_it_does_in_process():
    """A process pool of compilers (the GPU's default) gives the same answers, in order."""
    from compiler_cases.harness import program
    from drtriton.policy import CompilerPolicy
    from drtriton.train.pairs import PairsConfig, _compile_variants, _compilers

    sources = [program(f"return torch.relu(torch.matmul(a, b)) * {k}", [(8, 12), (12, 6)])
               for k in (2, 3)]
    teacher = CompilerPolicy(device="cpu")
    with _compilers(PairsConfig("p", "o", variants=3, compile_workers=2), "cpu") as pool:
        assert pool is not None
        compiled = list(pool.map(_compile_variants, [teacher] * 2, sources, [3, 3]))
    assert compiled == [_compile_variants(teacher, s, 3) for s in sources]
    assert all(len(answers) >= 2 for answers in compiled)
