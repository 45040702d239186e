"""The CPU training chain (init-model -> synth -> pairs -> sft -> rl, resume) and the RL update.

What the chain proves: every stage runs offline on a CPU through the CLI, the RL step really
judges answers and applies a DRPO update (the random tiny model never writes a correct answer, so
``--teacher-mix 1`` puts one compiler answer into each group: groups then hold correct and
incorrect answers and the weights must change), checkpoints load with transformers, metrics are
finite, and ``--resume`` continues where the checkpoint left off. It does not show that a tiny
model learns to write Triton.
"""

import dataclasses
import json
import math
import random

import pytest
import torch
from typer.testing import CliRunner

from drtriton.cli import app
from drtriton.train.drpo import drpo_loss
from drtriton.train.rl import RLConfig, RLRun, Sample, build_batch, token_logps

runner = CliRunner()


def invoke(*args: str):
    result = runner.invoke(app, [str(a) for a in args])
    assert result.exit_code == 0, result.output
    return result


def read_metrics(path):
    return [json.loads(line) for line in path.read_text().splitlines()]


def weights(directory):
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(directory)
    return {k: v.detach().clone() for k, v in model.state_dict().items()}


def run_chain(tmp_path, programs: int, sft_steps: int, rl_steps: int, extra: tuple = ()):
    model, prog, pairs = tmp_path / "tiny", tmp_path / "programs.jsonl", tmp_path / "pairs.jsonl"
    invoke("init-model", "--preset", "tiny", "--out", model)
    invoke("synth", "--level", "1", "--num", programs, "--out", prog, "--seed", 3)
    invoke("pairs", "--programs", prog, "--out", pairs, "--device", "cpu", "--judge-workers", 2)
    assert len(pairs.read_text().splitlines()) >= 1
    invoke("sft", "--model", model, "--pairs", pairs, "--out", tmp_path / "sft",
           "--max-steps", sft_steps, "--batch-size", 2, "--lr", "1e-3")
    rl_args = ("rl", "--model", tmp_path / "sft", "--programs", prog, "--out", tmp_path / "rl",
               "--programs-per-step", 2, "--n", 3, "--teacher-mix", 1, "--max-new-tokens", 16,
               "--device", "cpu", "--judge-workers", 2, "--lr", "1e-3", *extra)
    invoke(*rl_args, "--max-steps", rl_steps)
    return rl_args


def check_run(tmp_path, steps: int):
    rows = read_metrics(tmp_path / "rl" / "metrics.jsonl")
    assert [r["step"] for r in rows] == list(range(1, steps + 1))
    for r in rows:
        for key in ("loss", "kl", "correct_rate", "frac_groups_with_signal", "time_judge_s"):
            assert math.isfinite(r[key]), (key, r)
        assert r["level"] == 1 and r["teacher_answers"] == 2
    # The compiler's answers are correct and the model's are not: every group has signal.
    assert all(r["frac_groups_with_signal"] == 1.0 for r in rows)
    after = weights(tmp_path / "rl" / "checkpoint")
    before = weights(tmp_path / "sft")
    assert any(not torch.equal(before[k], after[k]) for k in before)  # the update happened
    assert all(torch.isfinite(v).all() for v in after.values())


def test_cpu_chain_fast(tmp_path):
    rl_args = run_chain(tmp_path, programs=2, sft_steps=2, rl_steps=2)
    check_run(tmp_path, 2)
    state = json.loads((tmp_path / "rl" / "checkpoint" / "state.json").read_text())
    assert state["step"] == 2
    # A second run into the same directory needs --resume; with it, it continues at step 3.
    again = runner.invoke(app, [str(a) for a in rl_args] + ["--max-steps", "3"])
    assert again.exit_code == 2 and "--resume" in again.output
    invoke(*rl_args, "--max-steps", 3, "--resume")
    check_run(tmp_path, 3)


def test_sft_with_lora_writes_a_plain_merged_checkpoint(tmp_path):
    model, prog, pairs = tmp_path / "tiny", tmp_path / "programs.jsonl", tmp_path / "pairs.jsonl"
    invoke("init-model", "--preset", "tiny", "--out", model)
    invoke("synth", "--level", "1", "--num", 2, "--out", prog, "--seed", 3)
    invoke("pairs", "--programs", prog, "--out", pairs, "--device", "cpu", "--judge-workers", 2)
    invoke("sft", "--model", model, "--pairs", pairs, "--out", tmp_path / "sft", "--max-steps", 2,
           "--batch-size", 2, "--lr", "1e-2", "--lora", "--lora-rank", 4)
    assert not (tmp_path / "sft" / "adapter_config.json").exists()
    trained, base = weights(tmp_path / "sft"), weights(model)
    assert set(trained) == set(base) and any(not torch.equal(base[k], trained[k]) for k in base)


def test_rl_with_lora_trains_adapters_resumes_and_exports_a_merged_model(tmp_path):
    model, prog, out = tmp_path / "tiny", tmp_path / "programs.jsonl", tmp_path / "rl"
    invoke("init-model", "--preset", "tiny", "--out", model)
    invoke("synth", "--level", "1", "--num", 2, "--out", prog, "--seed", 3)
    args = ("rl", "--model", model, "--programs", prog, "--out", out, "--programs-per-step", 2,
            "--n", 3, "--teacher-mix", 1, "--max-new-tokens", 16, "--device", "cpu", "--lr", "1e-2",
            "--judge-workers", 2, "--lora", "--lora-rank", 4)
    invoke(*args, "--max-steps", 2)
    assert (out / "checkpoint" / "adapter_config.json").exists()  # adapters, not a full copy
    assert not (out / "checkpoint" / "model.safetensors").exists()
    merged, base = weights(out / "merged"), weights(model)
    assert set(merged) == set(base)  # a plain checkpoint with the base's parameter names
    assert any(not torch.equal(base[k], merged[k]) for k in base)  # the adapters learned something
    assert all(torch.isfinite(v).all() for v in merged.values())
    # resuming needs the same mode; with it, the run continues at step 3
    wrong = runner.invoke(
        app, [str(a) for a in args if a != "--lora"] + ["--max-steps", "3", "--resume"]
    )
    assert wrong.exit_code == 2 and "with --lora" in " ".join(wrong.output.split())
    invoke(*args, "--max-steps", 3, "--resume")
    rows = read_metrics(out / "metrics.jsonl")
    assert [r["step"] for r in rows] == [1, 2, 3] and all(math.isfinite(r["loss"]) for r in rows)


@pytest.mark.slow
def test_cpu_chain_longer_with_grpo_ablation(tmp_path):
    run_chain(tmp_path, programs=6, sft_steps=6, rl_steps=4)
    check_run(tmp_path, 4)
    grpo = ("rl", "--model", tmp_path / "sft", "--programs", tmp_path / "programs.jsonl",
            "--out", tmp_path / "grpo", "--objective", "grpo", "--programs-per-step", 2, "--n", 3,
            "--teacher-mix", 1, "--max-new-tokens", 16, "--device", "cpu", "--max-steps", 2)
    invoke(*grpo)
    assert [r["step"] for r in read_metrics(tmp_path / "grpo" / "metrics.jsonl")] == [1, 2]


@pytest.mark.parametrize(
    "args, message",
    [
        (
            ["rl", "--model", "{tmp}", "--programs", "{tmp}/p.jsonl", "--out", "{tmp}/o"],
            "config.json",
        ),
        (
            ["sft", "--model", "{tmp}/m", "--pairs", "{tmp}/missing.jsonl", "--out", "{tmp}/o"],
            "does not exist",
        ),
        (["init-model", "--preset", "huge", "--out", "{tmp}/m"], "unknown preset"),
        (
            ["pairs", "--programs", "{tmp}/bad.jsonl", "--out", "{tmp}/o.jsonl", "--device", "cpu"],
            "not JSON",
        ),
        (
            [
                "rl",
                "--model",
                "{tmp}/m",
                "--programs",
                "{tmp}/p.jsonl",
                "--out",
                "{tmp}/o",
                "--objective",
                "ppo",
            ],
            "objective",
        ),
        (
            [
                "rl",
                "--model",
                "{tmp}/m",
                "--programs",
                "{tmp}/p.jsonl",
                "--out",
                "{tmp}/o",
                "--levels",
                "1,x",
            ],
            "--levels",
        ),
    ],
)
def test_bad_input_is_one_line_exit_2(tmp_path, args, message):
    (tmp_path / "m").mkdir()
    (tmp_path / "m" / "config.json").write_text("{}")
    (tmp_path / "p.jsonl").write_text(json.dumps({"source": "x = 1", "level": 1}) + "\n")
    (tmp_path / "bad.jsonl").write_text("{not json\n")
    result = runner.invoke(app, [a.format(tmp=tmp_path) for a in args])
    assert result.exit_code == 2, result.output
    text = " ".join(result.output.split())  # rich wraps long lines at the terminal width
    assert message in text and "Traceback" not in text
    assert text.count("error:") == 1


def test_micro_batched_update_equals_full_batch_gradient(tmp_path):
    """The two-pass update (scores without a graph, then sum_i dL/ds_i * s_i(theta) per
    micro-batch) gives the same gradient as autograd through drpo_loss on the whole batch."""
    from drtriton.train.model import init_model

    model_dir = init_model(tmp_path / "m", "tiny")
    programs = tmp_path / "p.jsonl"
    source = "import torch\n\nclass Model(torch.nn.Module):\n    pass\n"
    programs.write_text(json.dumps({"id": "a", "source": source, "level": 1}) + "\n")
    config = RLConfig(str(model_dir), str(programs), str(tmp_path / "rl"), n=3,
                      programs_per_step=2, mini_batches=1, micro_batch=2, grad_clip=1e9,
                      device="cpu")
    run = RLRun(config)
    rng = random.Random(0)
    program = {"id": "a", "source": source, "level": 1}
    samples = [
        Sample(
            g,
            program,
            [rng.randrange(3, 1000) for _ in range(rng.randrange(2, 9))],
            "",
            "policy",
            status="correct" if k == 0 else "incorrect",
        )
        for g in range(2)
        for k in range(3)
    ]
    captured = {}

    def capture_step(*_, **__):
        captured.update(
            {n: p.grad.clone() for n, p in run.model.named_parameters() if p.grad is not None}
        )

    run.optimizer.step = capture_step
    run.update(samples)
    assert captured, "no optimizer step was taken"

    run.model.zero_grad()
    batch = build_batch([run._prompt(program)] * 6, [s.completion for s in samples],
                        run.tokenizer.pad_token_id)
    logps = token_logps(run.model, batch, "cpu")
    scores = (logps * batch["completion_mask"]).sum(-1) / batch["completion_mask"].sum(-1)
    loss = drpo_loss(scores, torch.tensor([s.correct for s in samples]), torch.zeros(6),
                     torch.tensor([s.group for s in samples]))
    loss.backward()
    for name, p in run.model.named_parameters():
        assert torch.allclose(captured[name], p.grad, atol=1e-6, rtol=1e-4), name


def test_sft_with_save_steps_resumes_from_its_last_checkpoint(tmp_path, monkeypatch):
    # a stage cut at a GPU call's limit continues from its last checkpoint, not from step 1
    from transformers import Trainer

    from drtriton.train.sft import SFTRunConfig, run_sft

    model, pairs = tmp_path / "tiny", tmp_path / "pairs.jsonl"
    invoke("init-model", "--preset", "tiny", "--out", model)
    answer = "```python\nclass ModelNew:\n    pass\n```"
    pairs.write_text("".join(json.dumps({"source": f"# program {i}\n", "answer": answer}) + "\n"
                             for i in range(8)))
    steps = []
    original = Trainer.training_step
    monkeypatch.setattr(Trainer, "training_step",
                        lambda self, *a, **k: steps.append(1) or original(self, *a, **k))
    config = SFTRunConfig(str(model), str(pairs), str(tmp_path / "sft"), max_steps=2,
                          batch_size=2, lr=1e-3, save_steps=1)
    run_sft(config)
    assert len(steps) == 2 and (tmp_path / "sft" / "trainer" / "checkpoint-2").is_dir()
    run_sft(dataclasses.replace(config, max_steps=4))  # resumes at step 3
    assert len(steps) == 4
    logged = [r["step"] for r in read_metrics(tmp_path / "sft" / "sft_metrics.jsonl")
              if "loss" in r]
    assert logged == [1, 2, 3, 4]
    kept = sorted(p.name for p in (tmp_path / "sft" / "trainer").glob("checkpoint-*"))
    assert kept == ["checkpoint-4"]  # save_total_limit: the latest only
