"""Warm-up pairs: run a teacher on programs and keep only judge-verified answers.

Rejection sampling: the teacher, named like every policy (``compiler``, ``hf:MODEL_DIR``,
``openai:BASE_URL#MODEL``; ``drtriton.policy.load_policy``), writes ``samples`` answers per
program (the compiler is deterministic: its one answer is judged once), each parsed answer is
judged, and the first correct one per program is written as a pair with its verdict. Output: one
JSON record a line with ``program_id``, ``level``, ``source`` (the PyTorch program), ``answer``
(the assistant text the SFT stage trains on), ``teacher`` (the spec) and ``verdict``.

    drtriton pairs --programs programs.jsonl --out pairs.jsonl --teacher compiler --device cpu
    drtriton pairs --programs programs.jsonl --out pairs.jsonl \
        --teacher openai:http://127.0.0.1:8000/v1#Qwen/Qwen2.5-Coder-7B-Instruct
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from drtriton.bench import HELD_OUT_SEED
from drtriton.policy import Policy, Sampling, load_policy, parse_policy_spec
from drtriton.prompts import AnswerParseError, parse_answer


@dataclass(frozen=True)
class PairsConfig:
    programs: str
    out: str
    teacher: str = "compiler"  # a policy spec: compiler | hf:MODEL_DIR | openai:BASE_URL#MODEL
    samples: int = 4  # answers per program (the compiler's repeat: judged once)
    # with the compiler as teacher: up to this many distinct translations per program (tiles,
    # warps, stages, fusion; ``CompilerPolicy.variants``), every verified one written
    variants: int = 1
    device: str = "auto"  # judge device (and the compiler's kernel flavour, a model's device)
    judge_workers: int | None = None
    judge_preset: str = "hardened"
    unsafe_no_sandbox: bool = False  # judge without bubblewrap (recorded in every verdict)
    temperature: float = 0.6
    max_new_tokens: int = 4096

    def validate(self) -> None:
        kind, args = parse_policy_spec(self.teacher)  # ValueError naming the accepted specs
        if kind == "hf" and not Path(args[0]).is_dir():
            raise ValueError(f"teacher {self.teacher}: no model directory {args[0]}")
        if self.samples < 1:
            raise ValueError("samples must be at least 1")
        if self.variants < 1:
            raise ValueError("variants must be at least 1")
        if self.variants > 1 and kind != "compiler":
            raise ValueError("--variants needs the compiler as teacher (--teacher compiler)")


def read_records(path: str | Path, required: tuple[str, ...], kind: str) -> list[dict]:
    """JSONL records that each carry the ``required`` string fields; clear errors by line."""
    rows = []
    with Path(path).open() as f:
        for number, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as exc:
                raise ValueError(f"{path}:{number}: not JSON ({exc.msg})") from None
            if not isinstance(row, dict) or not all(isinstance(row.get(k), str) for k in required):
                fields = " and ".join(f"'{k}'" for k in required)
                need = f"needs {fields} strings" if required else "must be a JSON object"
                raise ValueError(f"{path}:{number}: a {kind} record {need}")
            rows.append(row)
    if not rows:
        raise ValueError(f"{path}: no {kind}s")
    return rows


def read_programs(path: str | Path) -> list[dict]:
    """Program records (JSONL with at least ``source``; ``id`` and ``level`` when present)."""
    rows = read_records(path, ("source",), "program")
    for number, row in enumerate(rows, 1):
        if row.get("seed") == HELD_OUT_SEED:
            raise ValueError(
                f"{path}: record {number} was made with the held-out benchmark seed "
                f"{HELD_OUT_SEED}; "
                "training on it would leak the benchmark (synthesize with another --seed)"
            )
        row.setdefault("id", f"line{number}")
        row.setdefault("level", 1)
    return rows


def run_pairs(config: PairsConfig, progress=None, on_skip=None) -> dict:
    """Write verified pairs to ``config.out``; returns counts by outcome.

    ``progress(done, total)`` is called after each program's answers are judged;
    ``on_skip(program_id, reason)`` for a program skipped because it cannot be run, or the
    teacher failed on it (counted as ``invalid_program`` or ``teacher_error``).
    """
    from drtriton.judge import JudgeConfig, JudgePool

    config.validate()
    programs = read_programs(config.programs)
    judge_config = JudgeConfig(device=config.device, preset=config.judge_preset, time_compile=False,
                               unsafe_no_sandbox=config.unsafe_no_sandbox)
    device = judge_config.resolved_device()
    teacher = load_policy(config.teacher, device, precision=judge_config.precision)
    sampling = Sampling(temperature=config.temperature, max_new_tokens=config.max_new_tokens)
    counts: Counter[str] = Counter()
    out = Path(config.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    with JudgePool(judge_config, config.judge_workers) as pool, out.open("w") as f:
        for done, program in enumerate(programs, 1):
            try:
                if config.variants > 1:
                    pairs = _variant_pairs(pool, teacher, config.variants, program, counts)
                else:
                    pair = _pair(pool, teacher, config.samples, sampling, program, counts)
                    pairs = [pair] if pair is not None else []
            except _Skipped as skipped:
                counts[skipped.kind] += 1
                if on_skip:
                    on_skip(program["id"], skipped.reason)
                pairs = []
            for pair in pairs:
                pair["teacher"] = config.teacher
                f.write(json.dumps(pair, sort_keys=True) + "\n")
                counts["pairs"] += 1
            f.flush()
            if progress:
                progress(done, len(programs))
    counts["programs"] = len(programs)
    return dict(counts)


class _Skipped(Exception):
    def __init__(self, kind: str, reason: str) -> None:
        super().__init__(reason)
        self.kind, self.reason = kind, reason


def _pair(pool, teacher: Policy, n: int, sampling: Sampling, program: dict,
          counts: Counter) -> dict | None:
    """The first verified pair of one program, or None; ``_Skipped`` when the program cannot be
    run or the teacher fails on it: one bad program must not end the run. Repeated answers (the
    compiler's ``n`` copies of one) are judged once."""
    try:
        answers = teacher.generate([program["source"]], n, sampling)[0]
    except Exception as exc:  # noqa: BLE001 - reported with its program, like a bench row
        raise _Skipped("teacher_error", f"the teacher failed: {type(exc).__name__}: {exc}") from exc
    verified = _verified(pool, program, list(dict.fromkeys(answers)), counts)
    return verified[0][1] if verified else None


def _variant_pairs(pool, teacher, count: int, program: dict, counts: Counter) -> list[dict]:
    """Every verified one of the compiler's distinct translations of one program, each with
    its index (``variant``) and its verdict (on a GPU, its time: the variants rank by speed)."""
    answers = [teacher.as_answer(c) for c in teacher.variants(program["source"], count)]
    if not answers:
        raise _Skipped("teacher_error", "the compiler cannot convert this program")
    return [pair | {"variant": index} for index, pair in _verified(pool, program, answers, counts)]


def _verified(pool, program: dict, answers: list[str], counts: Counter) -> list[tuple[int, dict]]:
    """(index among ``answers``, pair record) of every answer that parses and is verified, all
    judged together; ``_Skipped`` when the program itself cannot be run."""
    from drtriton.program import ProgramError  # the judge's InvalidReferenceError is one

    candidates = []
    for index, answer in enumerate(answers):
        try:
            candidates.append((index, answer, parse_answer(answer)))
        except AnswerParseError:
            counts["unparsed"] += 1
    try:
        verdicts = pool.verify_many([(program["source"], c) for _, _, c in candidates])
    except ProgramError as exc:
        raise _Skipped("invalid_program", str(exc)) from exc
    found = []
    for (index, answer, _), verdict in zip(candidates, verdicts, strict=True):
        counts[verdict.status] += 1
        if verdict.ok:
            found.append((index, {"program_id": program["id"], "level": program["level"],
                                  "source": program["source"], "answer": answer,
                                  "verdict": verdict.to_dict()}))
    return found
