"""Curriculum RL with decoupled rewards (DRPO); GRPO as the ablation baseline.

One step: pick ``programs_per_step`` programs of the current curriculum level, sample ``n``
answers each (transformers ``generate``), parse and judge them through one warm ``JudgePool``
(r_c = verdict is ``correct`` in strict mode; r_s = clipped log speedup over eager, 0 on a CPU
where the interpreter gives no timing), then one epoch over the batch in ``mini_batches``
optimizer steps, each over complete groups. The DRPO loss is a function of the answers' scores
only, so each update is exact and memory-bounded: a no-grad pass gives scores and KL, the loss's
gradient with respect to the scores is taken there, and micro-batches of ``micro_batch`` answers
back-propagate sum_i (dL/ds_i) s_i(theta) plus the trust-region term.

``teacher_mix`` > 0 replaces that many answers per program with the built-in compiler's answer
(off-policy samples, scored under the policy like any other). It exists so a tiny random model
(which never writes a correct answer) still gets groups with signal; leave it 0 for real runs.

Every step appends one line to ``OUT/metrics.jsonl``; ``OUT/checkpoint`` (a transformers
checkpoint plus optimizer and loop state) is replaced atomically every ``save_every`` steps, so
``resume=True`` continues a killed run losing at most the steps since the last save. With
``lora=True`` the base model stays frozen (bf16 on CUDA) and only adapters train: the checkpoint
holds the adapters, and a finished run also writes the merged model to ``OUT/merged``.

    drtriton rl --model runs/sft --programs programs.jsonl --out runs/rl --max-steps 100
"""

from __future__ import annotations

import hashlib
import json
import random
import shutil
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

import torch

from drtriton.devices import device_kind, resolve_device
from drtriton.policy import CompilerPolicy, Sampling, prompt_ids, sample_token_ids
from drtriton.prompts import AnswerParseError, parse_answer
from drtriton.stats import geomean
from drtriton.train.batches import build_batch, pad_rows, slice_rows, token_logps
from drtriton.train.drpo import (
    drpo_loss,
    groups_with_signal,
    grpo_advantages,
    grpo_loss,
    kl_coefficient,
    sequence_scores,
    speed_reward,
    token_kl,
)
from drtriton.train.lora import is_adapter_dir, with_adapters
from drtriton.train.pairs import read_programs


@dataclass(frozen=True)
class RLConfig:
    model: str
    programs: str
    out: str
    max_steps: int = 100
    programs_per_step: int = 4
    n: int = 8
    temperature: float = 0.6
    top_p: float = 1.0
    max_new_tokens: int = 2048
    objective: str = "drpo"  # drpo | grpo
    tau: float = 10.0
    lam: float = 1.0
    delta: float = 1e-4
    beta: float = 1e3
    all_correct: str = "drop"  # drop | speed (keep the speed signal of all-correct groups)
    clip_eps: float = 0.2  # grpo only
    lr: float = 1e-6
    grad_clip: float = 1.0
    mini_batches: int = 2  # optimizer steps per RL step (one epoch over the batch)
    micro_batch: int = 4  # answers per forward/backward pass
    levels: tuple[int, ...] = (1, 2, 5)
    advance_at: float = 0.5  # rolling correctness rate that moves to the next level
    window: int = 8  # steps in the rolling correctness rate
    device: str = "auto"  # auto | cpu | cuda | cuda:N (policy and judge)
    judge_workers: int | None = None
    judge_preset: str = "hardened"
    judge_timeout_s: float = 120.0
    unsafe_no_sandbox: bool = False  # judge without bubblewrap (recorded in every verdict)
    judge_repetitions: int = 100
    teacher_mix: int = 0
    lora: bool = False  # train adapters on a frozen base (bf16 on CUDA): a 7B policy fits one GPU
    lora_rank: int = 16
    save_every: int = 1
    seed: int = 0
    resume: bool = False

    def validate(self) -> None:
        checks = [
            (
                self.objective in ("drpo", "grpo"),
                f"objective must be drpo or grpo, got {self.objective!r}",
            ),
            (self.all_correct in ("drop", "speed"), "all_correct must be drop or speed"),
            (self.n >= 2, "n must be at least 2 (groups need several answers)"),
            (0 <= self.teacher_mix < self.n, "teacher_mix must be in [0, n)"),
            (
                self.max_steps >= 1 and self.programs_per_step >= 1,
                "max_steps and programs_per_step must be >= 1",
            ),
            (
                1 <= self.mini_batches <= self.programs_per_step,
                "mini_batches must be in [1, programs_per_step]",
            ),
            (
                self.micro_batch >= 1 and self.save_every >= 1,
                "micro_batch and save_every must be >= 1",
            ),
            (bool(self.levels), "levels must not be empty"),
            (self.lora_rank >= 1, "lora_rank must be >= 1"),
        ]
        for ok, message in checks:
            if not ok:
                raise ValueError(message)

    def resolved_device(self) -> str:
        return resolve_device(self.device)


# ----------------------------------------------------------------------------- curriculum
@dataclass
class Curriculum:
    """Levels in order; advance when the rolling correctness rate reaches ``advance_at``."""

    levels: list[int]
    advance_at: float
    window: int
    index: int = 0
    history: list[float] = field(default_factory=list)  # correctness rates at this level

    @property
    def level(self) -> int:
        return self.levels[self.index]

    def rolling(self) -> float:
        recent = self.history[-self.window:]
        return sum(recent) / len(recent) if recent else 0.0

    def record(self, correct_rate: float) -> bool:
        """Add one step's rate; True when this moved to the next level."""
        self.history.append(correct_rate)
        full = len(self.history) >= self.window
        if full and self.rolling() >= self.advance_at and self.index + 1 < len(self.levels):
            self.index += 1
            self.history = []
            return True
        return False


# ----------------------------------------------------------------------------- one batch
@dataclass
class Sample:
    group: int
    program: dict
    completion: list[int]
    text: str
    origin: str  # policy | teacher
    candidate: str | None = None
    status: str = "unparsed"
    reason: str = ""
    speedup: float | None = None

    @property
    def correct(self) -> bool:
        return self.status == "correct"


# ----------------------------------------------------------------------------- the trainer
class RLRun:
    """State of one RL run: model, optimizer, judge pool, curriculum, step counter."""

    def __init__(self, config: RLConfig) -> None:
        from transformers import AutoTokenizer

        config.validate()
        self.config = config
        self.out = Path(config.out)
        self.device = config.resolved_device()
        self.programs = read_programs(config.programs)
        by_level: dict[int, list[dict]] = {}
        for p in self.programs:
            by_level.setdefault(int(p["level"]), []).append(p)
        levels = [lv for lv in config.levels if lv in by_level]
        if not levels:
            have = ", ".join(map(str, sorted(by_level)))
            raise ValueError(f"no programs at levels {list(config.levels)} (the file has {have})")
        self.by_level = by_level
        self.curriculum = Curriculum(levels, config.advance_at, config.window)
        self.step = 0
        checkpoint = self.out / "checkpoint"
        if not checkpoint.exists() and (self.out / "checkpoint.old").exists():
            (self.out / "checkpoint.old").rename(checkpoint)  # killed in the middle of a swap
        source = config.model
        if config.resume and (checkpoint / "state.json").exists():
            source = str(checkpoint)
        elif (self.out / "metrics.jsonl").exists() and not config.resume:
            raise ValueError(
                f"{self.out} already holds a run; pass --resume or choose another --out"
            )
        resuming = source != config.model
        if config.resume and not resuming:  # no checkpoint yet: its steps are run again
            _truncate_metrics(self.out / "metrics.jsonl", 0)
        if resuming and is_adapter_dir(checkpoint) != config.lora:
            written = "with" if is_adapter_dir(checkpoint) else "without"
            raise ValueError(f"{checkpoint} was written {written} --lora; resume it the same way")
        self.tokenizer = AutoTokenizer.from_pretrained(source)
        self.model = self._load_model(checkpoint if resuming else None)
        trainable = [p for p in self.model.parameters() if p.requires_grad]
        self.optimizer = torch.optim.AdamW(trainable, lr=config.lr, weight_decay=0.0)
        if resuming:
            self._load_state(checkpoint)
        self.teacher = CompilerPolicy(device=device_kind(self.device))
        self._teacher_cache: dict[str, list[int]] = {}
        self._verdicts: dict[str, tuple[str, str, float | None]] = {}
        self._prompt_cache: dict[str, list[int]] = {}

    def _load_model(self, checkpoint: Path | None):
        """fp32 weights (on CUDA the passes run under bf16 autocast), from the checkpoint when
        resuming; with ``lora``, the base model frozen (bf16 on CUDA) under fp32 adapters, the
        checkpoint's adapters when resuming."""
        from transformers import AutoModelForCausalLM

        c = self.config
        if c.lora:
            dtype = torch.bfloat16 if self.device.startswith("cuda") else torch.float32
            base = AutoModelForCausalLM.from_pretrained(c.model, dtype=dtype)
            model = with_adapters(base, c.lora_rank, checkpoint)
        else:
            model = AutoModelForCausalLM.from_pretrained(
                str(checkpoint or c.model), dtype=torch.float32
            )
        model.to(self.device)
        model.config.use_cache = True
        return model

    def export_merged(self) -> Path:
        """With ``lora``: the adapters merged into the base, saved as a plain checkpoint in
        OUT/merged (the run's model is merged in place: call it last)."""
        merged = self.model.merge_and_unload()
        path = self.out / "merged"
        merged.save_pretrained(path)
        self.tokenizer.save_pretrained(path)
        return path

    # -- state ------------------------------------------------------------------------------
    def _load_state(self, checkpoint: Path) -> None:
        state = json.loads((checkpoint / "state.json").read_text())
        self.step = state["step"]
        self.curriculum.index = state["level_index"]
        self.curriculum.history = state["history"]
        self.optimizer.load_state_dict(
            torch.load(checkpoint / "optimizer.pt", map_location=self.device, weights_only=True)
        )
        _truncate_metrics(self.out / "metrics.jsonl", self.step, state.get("metrics"))

    def save(self, metrics: dict | None = None) -> None:
        """Write the checkpoint to a temporary directory, then swap it in (atomic on POSIX).
        ``metrics``: the row of the step saved, kept in the checkpoint, so that a run killed
        before appending it to metrics.jsonl gets it back on resume."""
        final = self.out / "checkpoint"
        tmp = self.out / "checkpoint.tmp"
        shutil.rmtree(tmp, ignore_errors=True)
        self.model.save_pretrained(tmp)
        self.tokenizer.save_pretrained(tmp)
        torch.save(self.optimizer.state_dict(), tmp / "optimizer.pt")
        state = {
            "step": self.step,
            "level_index": self.curriculum.index,
            "history": self.curriculum.history,
            "config": asdict(self.config),
            "metrics": metrics,
        }
        (tmp / "state.json").write_text(json.dumps(state, indent=1, default=str))
        old = self.out / "checkpoint.old"
        shutil.rmtree(old, ignore_errors=True)
        if final.exists():
            final.rename(old)
        tmp.rename(final)
        shutil.rmtree(old, ignore_errors=True)

    # -- phases -----------------------------------------------------------------------------
    def _pick_programs(self) -> list[dict]:
        pool = self.by_level[self.curriculum.level]
        rng = random.Random(self.config.seed * 1_000_003 + self.step)  # resumable: no RNG state
        k = self.config.programs_per_step
        return rng.sample(pool, k) if k <= len(pool) else [rng.choice(pool) for _ in range(k)]

    def _prompt(self, program: dict) -> list[int]:
        key = program["id"]
        if key not in self._prompt_cache:
            self._prompt_cache[key] = prompt_ids(self.tokenizer, program["source"])
        return self._prompt_cache[key]

    def _teacher_completion(self, program: dict) -> tuple[list[int], str]:
        key = program["id"]
        if key not in self._teacher_cache:
            text = self.teacher.answer(program["source"])
            ids = self.tokenizer(text, add_special_tokens=False)["input_ids"]
            self._teacher_cache[key] = list(ids) + [self.tokenizer.eos_token_id]
        ids = self._teacher_cache[key]
        return ids, self.tokenizer.decode(ids, skip_special_tokens=True)

    def generate(self, programs: list[dict]) -> list[Sample]:
        c = self.config
        sampling = Sampling(
            c.temperature, c.top_p, c.max_new_tokens, seed=c.seed * 7919 + self.step
        )
        own = c.n - c.teacher_mix
        with self._autocast():
            groups = sample_token_ids(
                self.model, self.tokenizer, [self._prompt(p) for p in programs], own, sampling
            )
        samples = []
        for g, (program, completions) in enumerate(zip(programs, groups, strict=True)):
            for ids in completions:
                text = self.tokenizer.decode(ids, skip_special_tokens=True)
                samples.append(Sample(g, program, ids, text, "policy"))
            for _ in range(c.teacher_mix):
                ids, text = self._teacher_completion(program)
                samples.append(Sample(g, program, ids, text, "teacher"))
        return samples

    def judge(self, pool, samples: list[Sample]) -> int:
        """Parse every answer and judge the new (program, candidate) pairs, each program's as a
        group (its reference and baselines computed once); returns judge calls."""
        todo: dict[str, tuple[str, str]] = {}
        for s in samples:
            try:
                s.candidate = parse_answer(s.text)
            except AnswerParseError as exc:
                s.status, s.reason = "unparsed", exc.reason
                continue
            key = _pair_key(s.program["id"], s.candidate)
            if key not in self._verdicts:
                todo[key] = (s.program["source"], s.candidate)
        by_program: dict[str, list[str]] = {}
        for key, (source, _) in todo.items():
            by_program.setdefault(source, []).append(key)
        groups = [(source, [todo[k][1] for k in keys]) for source, keys in by_program.items()]
        results = pool.verify_groups(groups) if groups else []
        for keys, verdicts in zip(by_program.values(), results, strict=True):
            if isinstance(verdicts, Exception):  # a training program that cannot run
                raise verdicts
            for key, verdict in zip(keys, verdicts, strict=True):
                self._verdicts[key] = (verdict.status, verdict.reason[:200],
                                       verdict.speedup_eager)
        for s in samples:
            if s.candidate is not None:
                key = _pair_key(s.program["id"], s.candidate)
                s.status, s.reason, s.speedup = self._verdicts[key]
        return len(todo)

    def update(self, samples: list[Sample]) -> dict:
        """One epoch over the batch: ``mini_batches`` optimizer steps over complete groups."""
        c = self.config
        batch = self._batch(samples)
        group = torch.tensor([s.group for s in samples])
        correct = torch.tensor([s.correct for s in samples])
        speed = torch.tensor([speed_reward(s.speedup) if s.correct else 0.0 for s in samples])
        self.model.train()
        old = self._logps_no_grad(batch, list(range(len(samples))))
        n_groups = int(group.max().item()) + 1
        parts = [list(range(i, n_groups, c.mini_batches)) for i in range(c.mini_batches)]
        losses, kls, norms = [], [], []
        for part in parts:
            rows = [i for i, s in enumerate(samples) if s.group in part]
            loss, kl, norm = self._update_rows(batch, rows, old, group, correct, speed)
            losses.append(loss)
            kls.append(kl)
            norms.append(norm)
        return {
            "loss": sum(losses) / len(losses),
            "kl": sum(kls) / len(kls),
            "kl_max": max(kls),
            "grad_norm": max(norms),
        }

    def _batch(self, samples: list[Sample]) -> dict:
        prompts = [self._prompt(s.program) for s in samples]
        return build_batch(prompts, [s.completion for s in samples], self.tokenizer.pad_token_id)

    def answer_scores(self, samples: list[Sample]) -> list[float]:
        """s(o), the mean token log-probability, of each answer under the current policy."""
        logps = self._logps_no_grad(self._batch(samples), list(range(len(samples))))
        return [float(t.mean()) if t.numel() else 0.0 for t in logps]

    def _logps_no_grad(self, batch: dict, rows: list[int]) -> list[torch.Tensor]:
        """Per-answer token log-probs (trimmed to each answer's length), without a graph."""
        out: list[torch.Tensor] = [torch.empty(0)] * len(rows)
        with torch.no_grad(), self._autocast():
            for start in range(0, len(rows), self.config.micro_batch):
                chunk = rows[start:start + self.config.micro_batch]
                sub = slice_rows(batch, chunk)
                logps = token_logps(self.model, sub, self.device).cpu()
                lengths = sub["completion_mask"].sum(-1).long().tolist()
                for j, n in enumerate(lengths):
                    out[start + j] = logps[j, :n]
        return out

    def _update_rows(self, batch, rows, old, group, correct, speed) -> tuple[float, float, float]:
        c = self.config
        now = self._logps_no_grad(batch, rows)
        old_rows = [old[i] for i in rows]
        tokens = sum(t.numel() for t in now)
        kl_sum = sum(float(token_kl(n, o).sum()) for o, n in zip(old_rows, now, strict=True))
        kl_value = kl_sum / max(1, tokens)
        coef = kl_coefficient(kl_value, c.beta, c.delta)
        index = torch.tensor(rows)
        if c.objective == "drpo":
            scores = torch.stack([t.mean() if t.numel() else t.new_zeros(()) for t in now])
            scores.requires_grad_(True)
            loss = drpo_loss(
                scores, correct[index], speed[index], group[index], c.lam, c.tau, c.all_correct
            )
            (score_grad,) = (
                torch.autograd.grad(loss, scores)
                if loss.requires_grad
                else (torch.zeros_like(scores),)
            )
        else:
            rewards = correct.float() * (1.0 + speed)  # speed only counts for correct answers
            advantages = grpo_advantages(rewards[index], group[index])
            loss = None
        signal = bool(score_grad.any()) if c.objective == "drpo" else bool(advantages.any())
        if not signal and coef == 0.0:
            # No group with signal and inside the trust region: no gradient, so no step (an
            # AdamW step on zero gradients would still move the weights by its momentum).
            return (float(loss) if loss is not None else 0.0), kl_value, 0.0
        self.optimizer.zero_grad(set_to_none=True)
        grpo_total = 0.0
        for start in range(0, len(rows), c.micro_batch):
            local = list(range(start, min(start + c.micro_batch, len(rows))))
            sub = slice_rows(batch, [rows[j] for j in local])
            mask = sub["completion_mask"].to(self.device)
            old_sub = pad_rows([old_rows[j] for j in local], mask.shape[1]).to(self.device)
            with self._autocast():
                logps = token_logps(self.model, sub, self.device)
            kl_sum = (token_kl(logps, old_sub) * mask).sum() / max(1, tokens)
            surrogate = coef * kl_sum  # gradient of the squared hinge, (beta/2)[KL - delta]_+^2
            if c.objective == "drpo":
                g = score_grad[local].to(self.device)
                surrogate = surrogate + (g * sequence_scores(logps, mask)).sum()
            else:
                part = grpo_loss(
                    logps, old_sub, mask, advantages[local].to(self.device), c.clip_eps
                )
                part = part * len(local) / len(rows)
                grpo_total += float(part.detach())
                surrogate = surrogate + part
            surrogate.backward()
        norm = torch.nn.utils.clip_grad_norm_(self.model.parameters(), c.grad_clip)
        self.optimizer.step()
        value = float(loss.detach()) if loss is not None else grpo_total
        return value + 0.5 * c.beta * max(0.0, kl_value - c.delta) ** 2, kl_value, float(norm)

    def _autocast(self):
        if self.device.startswith("cuda"):
            return torch.autocast("cuda", dtype=torch.bfloat16)
        return torch.autocast("cpu", enabled=False)

    # -- the loop ---------------------------------------------------------------------------
    def run_step(self, pool) -> dict:
        t0 = time.perf_counter()
        level = self.curriculum.level
        programs = self._pick_programs()
        samples = self.generate(programs)
        t1 = time.perf_counter()
        judged = self.judge(pool, samples)
        t2 = time.perf_counter()
        stats = self.update(samples)
        t3 = time.perf_counter()
        self.step += 1
        metrics = _step_metrics(samples, level, self.step) | stats
        metrics["programs"] = [p["id"] for p in programs]
        advanced = self.curriculum.record(metrics["correct_rate"])
        metrics.update(
            rolling_correct_rate=self.curriculum.rolling() if not advanced else None,
            advanced_to=self.curriculum.level if advanced else None,
            judge_calls=judged,
            time_generate_s=t1 - t0,
            time_judge_s=t2 - t1,
            time_update_s=t3 - t2,
        )
        t4 = time.perf_counter()
        if self.step % self.config.save_every == 0 or self.step >= self.config.max_steps:
            self.save(metrics)
        t5 = time.perf_counter()
        metrics.update(time_save_s=t5 - t4, time_step_s=t5 - t0)
        with (self.out / "metrics.jsonl").open("a") as f:
            f.write(json.dumps(metrics, sort_keys=True) + "\n")
        return metrics


def has_checkpoint(out: Path) -> bool:
    """Whether the run directory ``out`` holds a checkpoint to resume (or one mid-swap)."""
    return any((out / name / "state.json").exists() for name in ("checkpoint", "checkpoint.old"))


def run_rl(config: RLConfig, on_step: Callable[[dict], None] | None = None) -> list[dict]:
    """Run (or resume) RL until ``max_steps``; returns this invocation's metrics rows."""
    from drtriton.judge import JudgeConfig, JudgePool

    run = RLRun(config)
    run.out.mkdir(parents=True, exist_ok=True)
    (run.out / "rl_config.json").write_text(json.dumps(asdict(config), indent=1))
    judge_config = JudgeConfig(
        device=run.device,
        preset=config.judge_preset,
        time_compile=False,  # the reward only needs eager timing
        timeout_s=config.judge_timeout_s,
        repetitions=config.judge_repetitions,
        unsafe_no_sandbox=config.unsafe_no_sandbox,
    )
    rows = []
    with JudgePool(judge_config, config.judge_workers) as pool:
        while run.step < config.max_steps:
            metrics = run.run_step(pool)
            rows.append(metrics)
            if on_step:
                on_step(metrics)
    if config.lora:
        run.export_merged()
    return rows


# ----------------------------------------------------------------------------- helpers
def _pair_key(program_id: str, candidate: str) -> str:
    return hashlib.sha256(f"{program_id}\0{candidate}".encode()).hexdigest()


def _step_metrics(samples: list[Sample], level: int, step: int) -> dict:
    own = [s for s in samples if s.origin == "policy"]
    group = torch.tensor([s.group for s in samples])
    correct = torch.tensor([s.correct for s in samples])
    mixed, full = groups_with_signal(correct, group)
    n_groups = int(group.max().item()) + 1
    speedups = [s.speedup for s in samples if s.correct and s.speedup is not None]
    return {
        "step": step,
        "level": level,
        "correct_rate": sum(s.correct for s in own) / max(1, len(own)),
        "correct_rate_all": sum(s.correct for s in samples) / len(samples),
        "parse_rate": sum(s.candidate is not None for s in own) / max(1, len(own)),
        "mean_speedup_correct": sum(speedups) / len(speedups) if speedups else None,
        "geomean_speedup_correct": geomean(speedups),
        "frac_groups_with_signal": mixed / n_groups,
        "frac_groups_all_correct": full / n_groups,
        "answers": len(samples),
        "teacher_answers": len(samples) - len(own),
        "completion_tokens": sum(len(s.completion) for s in own),
        "statuses": dict(Counter(s.status for s in samples)),
    }


def _truncate_metrics(path: Path, step: int, last: dict | None = None) -> None:
    """Keep only the lines of steps the checkpoint already contains, and the row ``last`` of its
    own step if the run was killed before appending it. A line cut short by a kill is no
    finished step: it goes too."""
    lines = path.read_text().splitlines() if path.exists() else []
    kept = [ln for ln in lines if (s := _step_of(ln)) is not None and s <= step]
    if last is not None and last.get("step") == step and all(_step_of(ln) != step for ln in kept):
        kept.append(json.dumps(last, sort_keys=True))
    if kept or path.exists():
        path.write_text("".join(ln + "\n" for ln in kept))


def _step_of(line: str) -> int | None:
    try:
        return int(json.loads(line).get("step", 0))
    except (ValueError, AttributeError, TypeError):
        return None
