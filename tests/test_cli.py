"""The drtriton command: happy path and clear one-line errors."""

import json

from typer.testing import CliRunner

from drtriton.cli import app

runner = CliRunner()


def test_synth_writes_jsonl(tmp_path):
    out = tmp_path / "sub" / "p.jsonl"
    result = runner.invoke(app, ["synth", "--level", "2", "--num", "3", "--out", str(out)])
    assert result.exit_code == 0, result.output
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(rows) == 3 and all(len(r["ops"]) == 2 for r in rows)
    assert not (tmp_path / "sub" / "p.jsonl.partial").exists()


def test_synth_bad_level_is_one_line_error(tmp_path):
    result = runner.invoke(
        app, ["synth", "--level", "0", "--num", "3", "--out", str(tmp_path / "p.jsonl")]
    )
    assert result.exit_code == 2
    assert "level must be between" in result.output
    assert "Traceback" not in result.output


def test_synth_unwritable_path(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    result = runner.invoke(
        app, ["synth", "--level", "1", "--num", "1", "--out", str(blocker / "p.jsonl")]
    )
    assert result.exit_code == 2
    assert "cannot create directory" in result.output


def test_synth_unknown_scale():
    result = runner.invoke(
        app, ["synth", "--level", "1", "--num", "1", "--scale", "huge", "--out", "x.jsonl"]
    )
    assert result.exit_code == 2 and "unknown scale" in result.output


def test_ops_lists_61():
    result = runner.invoke(app, ["ops"])
    assert result.exit_code == 0 and "61 operators" in result.output


def test_commands_module_converts_when_run_as_a_script(tmp_path):
    """Regression: a helper defined below the ``__main__`` guard made ``python -m
    drtriton.commands PROGRAM OUT`` fail with a NameError before converting anything."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    example = Path(__file__).resolve().parents[1] / "examples" / "mlp_gelu.py"
    out = tmp_path / "out.py"
    env = {**os.environ, "TRITON_INTERPRET": "1"}
    done = subprocess.run([sys.executable, "-m", "drtriton.commands", str(example), str(out)],
                          env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "class ModelNew" in out.read_text()
