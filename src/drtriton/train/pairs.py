"""Warm-up pairs: run a teacher on programs and keep only judge-verified answers.

Rejection sampling: the teacher, named like every policy (``compiler``, ``hf:MODEL_DIR``,
``openai:BASE_URL#MODEL``; ``drtriton.policy.load_policy``), writes ``samples`` answers per
program (the compiler is deterministic: its one answer is judged once), each parsed answer is
judged, and the first correct one per program is written as a pair with its verdict (with the
compiler as teacher, ``verify_fraction`` below 1 judges only a fixed sample of the programs and
writes the others' answers with a null verdict; ``unjudged_only`` writes only those, for a
``target`` device the judge is not on, and leaves the sample to a run there). Output: one
JSON record a line with ``program_id``, ``level``, ``source`` (the PyTorch program), ``answer``
(the assistant text the SFT stage trains on), ``teacher`` (the spec) and ``verdict``.

    drtriton pairs --programs programs.jsonl --out pairs.jsonl --teacher compiler --device cpu
    drtriton pairs --programs programs.jsonl --out pairs.jsonl \
        --teacher openai:http://127.0.0.1:8000/v1#Qwen/Qwen2.5-Coder-7B-Instruct
    drtriton pairs --programs programs.jsonl --out pairs.jsonl --variants 2 \
        --verify-fraction 0.02 --target cuda --unjudged-only   # on a CPU; then, on a GPU:
    drtriton pairs --programs programs.jsonl --out pairs.jsonl --variants 2 \
        --verify-fraction 0.02 --device cuda                   # judges the sample
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from drtriton.bench import HELD_OUT_SEED
from drtriton.devices import device_kind
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
    chunk: int = 64  # programs answered, then judged together
    # processes compiling the compiler's variants side by side (None: half the cores, at most
    # 8, on a GPU, where a chunk's compiles would otherwise leave the judge idle; 1 on a CPU)
    compile_workers: int | None = None
    timing_budget_s: float = 1.0  # timed calls per candidate for about this long (CUDA)
    # with the compiler as teacher: judge the answers of this fraction of the programs (a
    # sample fixed by each program's id), keep the others' answers unjudged (``verdict`` null,
    # counted as ``unverified``); the sample's verdicts measure the teacher's error rate
    verify_fraction: float = 1.0
    # with the compiler as teacher: each answer states the program's shapes (every input's and
    # op's result) before its code (``CompilerPolicy.shape_notes``)
    shape_notes: bool = False
    # with the compiler as teacher: the device its candidates are written for (cpu | cuda;
    # None: the judge's). Compiling needs no GPU, so a CPU can write a GPU's unjudged pairs
    target: str | None = None
    # write only the programs outside the verified sample (nothing judged); the sample's
    # programs stay unfinished for a run on the device the candidates target, resuming ``out``
    unjudged_only: bool = False

    def validate(self) -> None:
        kind, args = parse_policy_spec(self.teacher)  # ValueError naming the accepted specs
        if kind == "hf" and not Path(args[0]).is_dir():
            raise ValueError(f"teacher {self.teacher}: no model directory {args[0]}")
        if self.samples < 1:
            raise ValueError("samples must be at least 1")
        if self.variants < 1:
            raise ValueError("variants must be at least 1")
        if self.chunk < 1 or self.timing_budget_s <= 0:
            raise ValueError("chunk must be at least 1 and timing_budget_s positive")
        if not 0.0 < self.verify_fraction <= 1.0:
            raise ValueError(f"verify_fraction must be in (0, 1], got {self.verify_fraction}")
        if self.verify_fraction < 1.0 and kind != "compiler":
            raise ValueError("unjudged pairs need the compiler as teacher (verify_fraction 1)")
        if self.shape_notes and kind != "compiler":
            raise ValueError("shape notes need the compiler as teacher")
        if self.variants > 1 and kind != "compiler":
            raise ValueError("--variants needs the compiler as teacher (--teacher compiler)")
        if self.target is not None and kind != "compiler":
            raise ValueError("--target needs the compiler as teacher (--teacher compiler)")
        if self.target not in (None, "cpu", "cuda"):
            raise ValueError(f"target must be cpu or cuda, got {self.target!r}")
        if self.unjudged_only and self.verify_fraction >= 1.0:
            raise ValueError("--unjudged-only needs a verify_fraction below 1 (else every "
                             "program is judged)")

    def check_target(self, judge_device: str) -> None:
        """``ValueError`` when answers would be judged on a device they are not written for."""
        if self.target and not self.unjudged_only and device_kind(judge_device) != self.target:
            raise ValueError(f"answers written for {self.target} cannot be judged on "
                             f"{judge_device}; add --unjudged-only (the sample is judged later)")


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
    """Write verified pairs to ``config.out``; returns counts by outcome (this run's and, when
    resuming, the earlier runs' together).

    The programs of ``config.chunk`` at a time are answered, then judged together (every judge
    sandbox busy). A run cut short resumes: ``OUT.programs.jsonl`` records each finished
    program's outcome counts (and each judged answer that failed: index, status, reason) after
    its pairs are written, and a program without a record is
    answered again (its pairs, if any reached OUT, dropped first).
    ``progress(done, total)`` is called after each program; ``on_skip(program_id, reason)``
    for a program skipped because it cannot be run or the teacher failed on it (counted as
    ``invalid_program`` or ``teacher_error``).
    """
    from drtriton.judge import JudgeConfig, JudgePool

    config.validate()
    programs = read_programs(config.programs)
    judge_config = JudgeConfig(device=config.device, preset=config.judge_preset, time_compile=False,
                               timing_budget_s=config.timing_budget_s,
                               unsafe_no_sandbox=config.unsafe_no_sandbox)
    device = judge_config.resolved_device()
    config.check_target(device)
    out = Path(config.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    ledger = out.with_name(out.name + ".programs.jsonl")
    finished = _resume(out, ledger)
    counts: Counter[str] = Counter()
    for record in finished.values():
        counts.update(_countable(record["counts"]))
    todo = [p for p in programs if p["id"] not in finished]
    deferred = {p["id"] for p in todo if config.unjudged_only
                and in_sample(p["id"], config.verify_fraction)}
    todo = [p for p in todo if p["id"] not in deferred]
    done = len(programs) - len(todo) - len(deferred)
    if progress and done:
        progress(done, len(programs))
    if todo:
        teacher = load_policy(config.teacher, config.target or device,
                              precision=judge_config.precision)
        if config.shape_notes:
            teacher = dataclasses.replace(teacher, shape_notes=True)
        sampling = Sampling(temperature=config.temperature, max_new_tokens=config.max_new_tokens)
        judges = (contextlib.nullcontext() if config.unjudged_only
                  else JudgePool(judge_config, config.judge_workers))
        with judges as pool, _compilers(config, device) as compilers, \
                out.open("a") as pairs_file, ledger.open("a") as ledger_file:
            for start in range(0, len(todo), config.chunk):
                chunk = todo[start:start + config.chunk]
                outcomes = _judge_chunk(pool, teacher, config, sampling, chunk, compilers)
                for program, (pairs, mine) in zip(chunk, outcomes, strict=True):
                    counts.update(_countable(_write(program, pairs, mine, config.teacher,
                                                    pairs_file, ledger_file, on_skip)))
                    done += 1
                    if progress:
                        progress(done, len(programs))
    counts["programs"] = len(programs)
    counts["left_to_judge"] = len(deferred)
    return {k: v for k, v in counts.items() if v}


def _write(program: dict, pairs: list[dict], mine: dict, teacher: str, pairs_file,
           ledger_file, on_skip) -> dict:
    """One finished program: its pairs, then its ledger record (so a pair without a record is
    never kept on resume); returns its outcome counts."""
    if "skipped" in mine:
        kind, reason = mine.pop("skipped")
        mine[kind] = 1
        if on_skip:
            on_skip(program["id"], reason)
    for pair in pairs:
        pairs_file.write(json.dumps(pair | {"teacher": teacher}, sort_keys=True) + "\n")
    mine["pairs"] = len(pairs)
    pairs_file.flush()
    ledger_file.write(json.dumps({"id": program["id"], "counts": mine}) + "\n")
    ledger_file.flush()
    return mine


def _countable(outcome: dict) -> dict:
    """A program's outcome counts without its list of failures."""
    return {k: v for k, v in outcome.items() if k != "failures"}


def _resume(out: Path, ledger: Path) -> dict[str, dict]:
    """The finished programs' records of an earlier run (none unless both files exist), after
    dropping from ``out`` the pairs of programs that never finished (and a torn last line)."""
    if not (out.exists() and ledger.exists()):
        out.write_text("")
        ledger.write_text("")
        return {}
    finished = {}
    for line in ledger.read_text().splitlines():
        try:
            record = json.loads(line)
        except json.JSONDecodeError:  # a torn last line: that program is done again
            continue
        finished[record["id"]] = record
    kept = []
    for line in out.read_text().splitlines():
        try:
            pair = json.loads(line)
        except json.JSONDecodeError:
            continue
        if pair.get("program_id") in finished:
            kept.append(line + "\n")
    out.write_text("".join(kept))
    ledger.write_text("".join(json.dumps(r) + "\n" for r in finished.values()))
    return finished


def _compilers(config: PairsConfig, device: str):
    """A process pool for the compiler's variants (a context manager; a null one for one
    worker or another teacher). Spawned, not forked: the parent runs judge threads."""
    import multiprocessing
    import os
    from concurrent.futures import ProcessPoolExecutor

    workers = config.compile_workers
    if workers is None and config.unjudged_only:  # no judge: every core compiles
        workers = min(8, os.cpu_count() or 1)
    elif workers is None:
        workers = min(8, max(1, (os.cpu_count() or 2) // 2)) if device != "cpu" else 1
    if config.variants <= 1 or workers <= 1:
        return contextlib.nullcontext()
    return ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn"))


def _compile_variants(teacher, source: str, count: int) -> list[str]:
    """``teacher.variants`` as answers (a process pool's job; an empty list: none)."""
    return teacher.as_answers(teacher.variants(source, count), source)


def _judge_chunk(pool, teacher: Policy, config: PairsConfig, sampling: Sampling,
                 chunk: list[dict], compilers=None) -> list[tuple[list[dict], dict]]:
    """(pairs, outcome counts) of each program of ``chunk``: answers drawn (the compiler's
    variants by ``compilers``, a process pool, when given), then the answers of every judged
    program of the chunk judged at once, each program's as a group (its reference runs once)."""
    answered = _answer_chunk(teacher, config, sampling, chunk, compilers)
    judged = [in_sample(program["id"], config.verify_fraction) and bool(items)
              for program, items, _ in answered]
    groups = [(program["source"], [c for _, _, c in items])
              for (program, items, _), j in zip(answered, judged, strict=True) if j]
    results = iter(pool.verify_groups(groups) if groups else [])
    found: list[list[tuple[int, dict]]] = [[] for _ in answered]
    for i, (program, items, mine) in enumerate(answered):
        record = {"program_id": program["id"], "level": program["level"],
                  "source": program["source"]}
        if not judged[i]:
            mine["unverified"] += len(items)
            found[i] = [(index, record | {"answer": answer, "verdict": None})
                        for index, answer, _ in items]
            continue
        verdicts = next(results)
        if isinstance(verdicts, Exception):  # the program itself cannot be run
            mine["skipped"] = ("invalid_program", str(verdicts))
            continue
        for (index, answer, _), verdict in zip(items, verdicts, strict=True):
            mine[verdict.status] += 1
            if verdict.ok:
                found[i].append((index, record | {"answer": answer,
                                                  "verdict": verdict.to_dict()}))
            else:  # the teacher's errors, kept with the program's record
                mine.setdefault("failures", []).append(
                    {"answer": index, "status": verdict.status, "reason": verdict.reason[:300]})
    return [_outcome(config, pairs, dict(mine))
            for (_, _, mine), pairs in zip(answered, found, strict=True)]


def _answer_chunk(teacher: Policy, config: PairsConfig, sampling: Sampling, chunk: list[dict],
                  compilers) -> list[tuple[dict, list[tuple[int, str, str]], Counter]]:
    """(program, its parsed answers, its counts so far) of each program of ``chunk``; a
    program the teacher fails on has no answers and a ``skipped`` entry."""
    compiled = None
    if config.variants > 1 and compilers is not None:
        compiled = list(compilers.map(_compile_variants, [teacher] * len(chunk),
                                      [p["source"] for p in chunk],
                                      [config.variants] * len(chunk)))
    answered = []
    for i, program in enumerate(chunk):
        mine: Counter = Counter()
        try:
            if config.variants > 1:
                answers = _variant_answers(teacher, config.variants, program,
                                           compiled[i] if compiled is not None else None)
            else:
                answers = _sampled_answers(teacher, config.samples, sampling, program)
        except _Skipped as skipped:
            answered.append((program, [], Counter({"skipped": (skipped.kind, skipped.reason)})))
            continue
        answered.append((program, _parsed(answers, mine), mine))
    return answered


def in_sample(program_id: str, fraction: float) -> bool:
    """Whether a program is among the judged ``fraction`` (a pure function of its id)."""
    if fraction >= 1.0:
        return True
    digest = hashlib.sha256(program_id.encode()).digest()
    return int.from_bytes(digest[:8], "big") < fraction * 2**64


def _outcome(config: PairsConfig, found: list[tuple[int, dict]], mine: dict):
    """The pairs one program keeps: with variants every verified one (with its index), else the
    first verified answer; a program found invalid keeps none."""
    if "skipped" in mine:
        return [], mine
    found.sort(key=lambda item: item[0])
    if config.variants > 1:
        return [pair | {"variant": index} for index, pair in found], mine
    return [pair for _, pair in found[:1]], mine


class _Skipped(Exception):
    def __init__(self, kind: str, reason: str) -> None:
        super().__init__(reason)
        self.kind, self.reason = kind, reason


def _sampled_answers(teacher: Policy, n: int, sampling: Sampling, program: dict) -> list[str]:
    """The teacher's ``n`` answers to one program, each distinct one once (the compiler's ``n``
    copies of one are judged once); ``_Skipped`` when the teacher fails on it: one bad program
    must not end the run."""
    try:
        answers = teacher.generate([program["source"]], n, sampling)[0]
    except Exception as exc:  # noqa: BLE001 - reported with its program, like a bench row
        raise _Skipped("teacher_error", f"the teacher failed: {type(exc).__name__}: {exc}") from exc
    return list(dict.fromkeys(answers))


def _variant_answers(teacher, count: int, program: dict,
                     compiled: list[str] | None = None) -> list[str]:
    """The compiler's distinct translations of one program (``CompilerPolicy.variants``, or
    ``compiled``, their answers made elsewhere); on a GPU the verdicts' times rank them."""
    answers = compiled if compiled is not None else _compile_variants(teacher, program["source"],
                                                                       count)
    if not answers:
        raise _Skipped("teacher_error", "the compiler cannot convert this program")
    return answers


def _parsed(answers: list[str], counts: Counter) -> list[tuple[int, str, str]]:
    """(index, answer, candidate source) of each answer that parses; the rest are counted."""
    found = []
    for index, answer in enumerate(answers):
        try:
            found.append((index, answer, parse_answer(answer)))
        except AnswerParseError:
            counts["unparsed"] += 1
    return found
