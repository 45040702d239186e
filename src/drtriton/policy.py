"""Policies: what turns a PyTorch program into candidate sources, behind one interface.

Every policy answers in the one prompt format (``drtriton.prompts``) and offers three views of
the same thing, program in, candidates out:

* ``generate(sources, n, sampling)``: ``n`` answers (text) per program, what training learns from;
* ``candidates(source, n, sampling)``: candidate sources for one program (the answers that parse),
  what the search judges (``search_generator`` makes a search's generator of any policy);
* ``first_candidate(source, pool)``: the one candidate pass@1 counts, and notes for its benchmark
  row, what the benchmark judges.

Three policies:

* ``CompilerPolicy``: the built-in compiler (deterministic; in the judge's mode and precision),
* ``HFPolicy``: a local Hugging Face causal LM checkpoint directory (transformers ``generate``),
* ``OpenAIPolicy``: any OpenAI-compatible ``/chat/completions`` endpoint (a vLLM server, ...),
  over plain HTTP with ``urllib``.

One name for each, everywhere (``bench --policy``, ``pairs --teacher``): ``compiler``,
``hf:MODEL_DIR`` or ``openai:BASE_URL#MODEL`` (``parse_policy_spec``, ``load_policy``).

    from drtriton.policy import CompilerPolicy, Sampling
    candidates = CompilerPolicy(device="cpu").candidates(source, 1, Sampling())
"""

from __future__ import annotations

import abc
import dataclasses
import json
import os
import threading
import urllib.error
import urllib.request
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from drtriton.devices import device_kind
from drtriton.program import TORCH_STATE_LOCK
from drtriton.prompts import AnswerParseError, build_messages, format_answer, parse_answer

if TYPE_CHECKING:
    from drtriton.judge import JudgePool


@dataclass(frozen=True)
class Sampling:
    """Sampling parameters shared by all policies (the compiler ignores them)."""

    temperature: float = 0.6
    top_p: float = 1.0
    max_new_tokens: int = 2048
    seed: int | None = None


class Policy(abc.ABC):
    """Program in, candidate sources out. A policy implements ``generate``; the other two views
    parse its answers unless the policy has a better way (the compiler has)."""

    # ``generate`` on many programs at once costs far less than one call per program (a local
    # model samples them as one batch): a benchmark draws first answers ahead (``Prefetched``)
    batches: bool = False

    @abc.abstractmethod
    def generate(self, sources: Sequence[str], n: int, sampling: Sampling) -> list[list[str]]:
        """``n`` candidate answers (text) for each program source, in input order."""

    def candidates(self, source: str, n: int, sampling: Sampling) -> list[str]:
        """Candidate sources from ``n`` answers for one program; answers that do not parse are
        dropped."""
        found = []
        for answer in self.generate([source], n, sampling)[0]:
            try:
                found.append(parse_answer(answer))
            except AnswerParseError:
                continue
        return found

    def default_sampling(self) -> Sampling:
        """The sampling of ``first_candidate`` and of a search's generator."""
        return Sampling()

    def first_candidate(self, source: str, pool: JudgePool) -> tuple[str, dict]:
        """The candidate pass@1 counts, the first answer's, and the notes for its benchmark row;
        raises (``AnswerParseError`` with the reason) when that answer holds none."""
        return parse_answer(self.generate([source], 1, self.default_sampling())[0][0]), {}

    def search_generator(self, samples: int = 1, sampling: Sampling | None = None):
        """This policy as a search's candidate generator (fragment source -> candidate
        sources), from ``samples`` answers per fragment. A model's answers are parsed here,
        never run."""
        sampling = sampling or self.default_sampling()
        return lambda source: self.candidates(source, samples, sampling)


# ----------------------------------------------------------------------------- the compiler
def compiler_candidates_in_child(source: str, device: str, mode: str, precision: str) -> dict:
    """``CompilerPolicy.candidates`` in a judge sandbox (``JudgePool.call``)."""
    policy = CompilerPolicy(device=device, mode=mode, precision=precision)
    return {"candidates": policy.candidates(source)}


@dataclass(frozen=True)
class SandboxedCandidates:
    """The compiler's search candidates for a program, each compiled in a sandbox of ``pool``
    (the search binds its judge pool with ``bind``). A program that cannot run gets none."""

    policy: CompilerPolicy
    pool: Any = None

    def bind(self, pool) -> SandboxedCandidates:
        return dataclasses.replace(self, pool=pool)

    def __call__(self, source: str) -> list[str]:
        if self.pool is None:
            raise RuntimeError("SandboxedCandidates needs a judge pool (bind)")
        arguments = {"device": self.policy.device, "mode": self.policy.mode,
                     "precision": self.policy.precision}
        try:
            result = self.pool.call(source, "drtriton.policy:compiler_candidates_in_child",
                                    arguments, phase="compiler capture")
        except Exception:  # the child could not run it: no candidate, as in-process
            return []
        return [c for c in result.get("candidates", []) if isinstance(c, str)]


@dataclass(frozen=True)
class CompilerPolicy(Policy):
    """The built-in compiler as a policy. Deterministic: one answer, repeated ``n`` times; a
    program it cannot lower gets an answer without code that says why (it fails to parse).

    ``mode`` is the judge's: a hybrid judge also gets the compiler's hybrid translation among the
    search's candidates. ``precision`` is the judge preset's (``JudgeConfig.precision``).
    """

    device: str = "cpu"  # kernel flavour: cpu (interpreter blocks) or cuda (autotuned kernels)
    mode: str = "strict"
    precision: str = "fp32"
    tuning_cache: str | None = None  # convert-time measurements (compiler.tune.TuningCache)
    shape_notes: bool = False  # answers state the program's shapes before the code

    def answer(self, source: str) -> str:
        from drtriton.compiler import CompilerConfig, UnsupportedOperatorError, compile_program

        config = CompilerConfig(mode=self.mode, device=self.device, precision=self.precision)
        try:
            candidate = compile_program(source, config)
        except UnsupportedOperatorError as exc:
            return f"The built-in compiler cannot convert this program: {exc}"
        return self.as_answer(candidate, source)

    def as_answer(self, candidate: str, source: str | None = None) -> str:
        """A translation of the compiler as the assistant's answer (what SFT trains on); with
        ``shape_notes`` and the program's ``source``, its shapes first (``compiler.notes``)."""
        return self.as_answers([candidate], source)[0]

    def as_answers(self, candidates: Sequence[str], source: str | None = None) -> list[str]:
        """``as_answer`` of several translations of one program (its notes made once)."""
        reasoning = "Translation by drtriton's built-in compiler."
        if self.shape_notes and source is not None:
            from drtriton.compiler.capture import capture
            from drtriton.compiler.notes import shape_notes

            try:
                reasoning += "\n\nShapes:\n" + shape_notes(capture(source))
            except Exception:  # noqa: BLE001 - a program it cannot capture: no notes
                pass
        return [format_answer(c, reasoning) for c in candidates]

    def generate(self, sources: Sequence[str], n: int, sampling: Sampling) -> list[list[str]]:
        return [[self.answer(s)] * n for s in sources]

    def variants(self, source: str, count: int) -> list[str]:
        """Up to ``count`` distinct correct-by-construction translations that differ in speed
        (teacher data whose answers rank by speed): the default; on a GPU every autotuned
        kernel fixed to its k-th config (tile sizes, warps, stages); then fusion cut short
        (at most 8, then 1 node per kernel). A program it cannot lower has none."""
        from drtriton.compiler import CompilerConfig, Tuning
        from drtriton.compiler.capture import capture
        from drtriton.compiler.lower import Lowering

        base = CompilerConfig(mode=self.mode, device=self.device, precision=self.precision)
        try:
            spaces = {k.name: len(k.configs) for k in Lowering(capture(source), base).run().kernels
                      if k.configs}
        except Exception:  # noqa: BLE001 - a program it cannot lower
            return []
        plans = [(base, None)] + [
            (base, Tuning(f"variant {k}", tuple((n, min(k, size - 1))
                                                for n, size in spaces.items())))
            for k in range(max(spaces.values(), default=0))]
        plans += [(dataclasses.replace(base, max_fused_nodes=m), None) for m in (8, 1)]
        return _distinct_compiles(source, plans, count)

    def candidates(self, source: str, n: int = 1, sampling: Sampling | None = None) -> list[str]:
        """Its strict translation, and under a hybrid judge also its hybrid one (vendor
        matmul/convolution); then each again with every computed input fused into the window
        and tile kernels that re-read it (``max_window_recompute=inf``), which differs only
        where the default materialises such an input. Variants with the same kernels count
        once; ``n`` and ``sampling`` do not apply (it is deterministic)."""
        return _distinct_compiles(source, [(c, None) for c in self._search_configs()])

    def search_generator(self, samples: int = 1, sampling: Sampling | None = None):
        """Its candidates compiled in a sandbox of the search's judge pool: compiling traces
        the fragment, whose constructor is the user's code (``SandboxedCandidates``)."""
        return SandboxedCandidates(self)

    def _search_configs(self) -> list:
        from drtriton.compiler import CompilerConfig

        modes = ("strict", "hybrid") if self.mode == "hybrid" else ("strict",)
        target = device_kind(self.device)
        return [CompilerConfig(mode=m, device=target, max_window_recompute=recompute,
                               precision=self.precision)
                for recompute in (CompilerConfig().max_window_recompute, float("inf"))
                for m in modes]

    def first_candidate(self, source: str, pool: JudgePool) -> tuple[str, dict]:
        """Compiled in one of ``pool``'s sandboxes (the program is a user's code), on a GPU
        tuned, and on a GPU in hybrid mode the faster of hybrid and strict; the notes say how
        (``compiler.convert.compile_in_child``). A program it cannot compile raises
        ``ValueError`` with the compiler's reason."""
        from drtriton.compiler.convert import compile_sandboxed
        from drtriton.compiler.tune import TuningCache

        tunings = TuningCache(self.tuning_cache) if self.tuning_cache else None
        result = compile_sandboxed(pool, source, self.mode, self.device, self.precision, tunings)
        if "error" in result:
            raise ValueError(result["error"])
        tuned = result.get("tuning", {}).get("choices", {})
        choice = result.get("hybrid_choice", {})
        return result["candidate"], {
            "tuned_kernels": len(tuned), "tuning_error": result.get("tuning_error", ""),
            "hybrid_choice": choice.get("chose", ""), "hybrid_choice_ms": _choice_ms(choice),
            "tuning_cached": bool(result.get("tuning_cached"))}


def _choice_ms(choice: dict) -> dict[str, float]:
    """What a hybrid convert measured side by side: the hybrid and strict compiles' times and,
    where it kept a mix of vendor and Triton products, the mix's (``compiler.mix``)."""
    times = {mode: choice[f"{mode}_ms"] for mode in ("hybrid", "strict") if f"{mode}_ms" in choice}
    kept = [t["trial_ms"] for t in choice.get("mix_trials", []) if t["kept"]]
    if kept:
        times["mixed"] = kept[-1]
    return times


def _distinct_compiles(source: str, plans: list, count: int | None = None) -> list[str]:
    """The compiler's translations of ``source`` under each (config, tuning) plan, in order, up
    to ``count``, each kept once by its kernels: a hybrid translation with no vendor call is the
    strict one but for its docstring's mode, and judging it again would double the cost. A plan
    it cannot compile (an operator it cannot lower, a trace failure) gives nothing."""
    from drtriton.compiler import compile_program, kernel_body

    found, bodies = [], set()
    for config, tuning in plans:
        if count is not None and len(found) == count:
            break
        try:
            candidate = compile_program(source, config, tuning)
        except Exception:  # noqa: BLE001 - no candidate from this plan
            continue
        if kernel_body(candidate) not in bodies:
            bodies.add(kernel_body(candidate))
            found.append(candidate)
    return found


# ----------------------------------------------------------------------------- local HF model
def prompt_ids(tokenizer: Any, source: str) -> list[int]:
    """Token ids of the prompt, ending with the assistant header (generation prompt)."""
    ids = tokenizer.apply_chat_template(
        build_messages(source), add_generation_prompt=True, tokenize=True
    )
    # transformers 5 may return a BatchEncoding; older versions a plain list.
    return list(ids["input_ids"] if hasattr(ids, "keys") else ids)


def sample_token_ids(
    model: Any, tokenizer: Any, prompts: Sequence[list[int]], n: int, sampling: Sampling,
    static_cache: bool = False, min_new_tokens: int = 0,
) -> list[list[list[int]]]:
    """Sample ``n`` completions (token ids, eos included when produced) per prompt.

    Prompts are left-padded into one batch; ``model`` may be on any device. ``static_cache``:
    transformers' preallocated KV cache (on CUDA it compiles the decoding step), the same tokens
    as the default growing cache; ``min_new_tokens`` forces lengths (timing probes).
    """
    import torch

    device = next(model.parameters()).device
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
    width = max(len(p) for p in prompts)
    ids = torch.full((len(prompts), width), pad, dtype=torch.long)
    mask = torch.zeros_like(ids)
    for i, p in enumerate(prompts):
        ids[i, width - len(p):] = torch.tensor(p)
        mask[i, width - len(p):] = 1
    # Sampling draws from torch's default generator, which a judge thread in this process seeds
    # for its inputs: generation holds the process lock (see TORCH_STATE_LOCK), even unseeded.
    with TORCH_STATE_LOCK:
        if sampling.seed is not None:
            torch.manual_seed(sampling.seed)
        was_training = model.training
        model.eval()
        with torch.no_grad():
            out = model.generate(
                input_ids=ids.to(device),
                attention_mask=mask.to(device),
                do_sample=sampling.temperature > 0,
                temperature=sampling.temperature if sampling.temperature > 0 else None,
                top_p=sampling.top_p,
                max_new_tokens=sampling.max_new_tokens,
                num_return_sequences=n,
                pad_token_id=pad,
                eos_token_id=tokenizer.eos_token_id,
                cache_implementation="static" if static_cache else None,
                min_new_tokens=min_new_tokens or None,
            )
        model.train(was_training)
    completions = out[:, width:].tolist()
    del out
    if device.type == "cuda":  # the cache's growth leaves GBs reserved that the judge may need
        torch.cuda.empty_cache()
    result = []
    for i in range(len(prompts)):
        group = []
        for seq in completions[i * n:(i + 1) * n]:
            if tokenizer.eos_token_id in seq:
                seq = seq[: seq.index(tokenizer.eos_token_id) + 1]
            group.append(seq)
        result.append(group)
    return result


class HFPolicy(Policy):
    """A local Hugging Face causal LM (checkpoint directory) sampled with transformers,
    ``batch_size`` prompts per ``generate`` call."""

    batches = True

    def __init__(self, model_dir: str, device: str = "cpu", batch_size: int = 4,
                 sampling: Sampling | None = None) -> None:
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        if not os.path.isdir(model_dir):  # transformers would read it as a Hub repo id
            raise FileNotFoundError(f"no model directory {model_dir} (a local checkpoint)")
        self.tokenizer = AutoTokenizer.from_pretrained(model_dir)
        dtype = torch.bfloat16 if device.startswith("cuda") else torch.float32
        self.model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=dtype).to(device)
        self.batch_size = batch_size
        self.sampling = sampling or Sampling()
        # One model and one tokenizer serve every thread of a bench: one call at a time (a fast
        # tokenizer used by two threads at once raises "Already borrowed", huggingface/tokenizers
        # issue 537; sampling is serialised by TORCH_STATE_LOCK anyway).
        self._lock = threading.Lock()

    def default_sampling(self) -> Sampling:
        return self.sampling

    def generate(self, sources: Sequence[str], n: int, sampling: Sampling) -> list[list[str]]:
        with self._lock:
            return self._generate(sources, n, sampling)

    def _generate(self, sources: Sequence[str], n: int, sampling: Sampling) -> list[list[str]]:
        answers: list[list[str]] = []
        for start in range(0, len(sources), self.batch_size):
            chunk = sources[start:start + self.batch_size]
            prompts = [prompt_ids(self.tokenizer, s) for s in chunk]
            for group in sample_token_ids(self.model, self.tokenizer, prompts, n, sampling):
                answers.append(
                    [self.tokenizer.decode(c, skip_special_tokens=True) for c in group]
                )
        return answers


class Prefetched(Policy):
    """``policy`` with its first answer to each of ``sources`` drawn ahead, in its batches:
    ``first_candidate`` then reads them, and any other call goes to ``policy``. A benchmark
    whose programs would otherwise be sampled one by one, 2,048 tokens each, uses it.
    ``progress(done, total)`` is called after each batch."""

    def __init__(self, policy: Policy, sources: Sequence[str], progress=None) -> None:
        self.policy = policy
        unique = list(dict.fromkeys(sources))
        step = max(1, getattr(policy, "batch_size", len(unique)))
        self._first: dict[str, str] = {}
        for start in range(0, len(unique), step):
            chunk = unique[start:start + step]
            answers = policy.generate(chunk, 1, policy.default_sampling())
            self._first.update((s, a[0]) for s, a in zip(chunk, answers, strict=True))
            if progress is not None:
                progress(len(self._first), len(unique))

    def default_sampling(self) -> Sampling:
        return self.policy.default_sampling()

    def generate(self, sources: Sequence[str], n: int, sampling: Sampling) -> list[list[str]]:
        if n == 1 and sampling == self.default_sampling() and all(
                s in self._first for s in sources):
            return [[self._first[s]] for s in sources]
        return self.policy.generate(sources, n, sampling)


# ----------------------------------------------------------------------------- OpenAI-compatible
@dataclass(frozen=True)
class OpenAIPolicy(Policy):
    """Any OpenAI-compatible chat endpoint, e.g. ``http://127.0.0.1:8000/v1`` (vLLM).

    The key is read from the environment variable named by ``api_key_env`` (may be unset for
    local servers). Servers that ignore ``n`` are asked again until ``n`` answers arrived.
    """

    base_url: str
    model: str
    api_key_env: str = "OPENAI_API_KEY"
    timeout_s: float = 600.0

    def _post(self, payload: dict) -> dict:
        url = self.base_url.rstrip("/") + "/chat/completions"
        headers = {"Content-Type": "application/json"}
        key = os.environ.get(self.api_key_env)
        if key:
            headers["Authorization"] = f"Bearer {key}"
        request = urllib.request.Request(url, json.dumps(payload).encode(), headers)
        try:
            with urllib.request.urlopen(request, timeout=self.timeout_s) as response:
                return json.loads(response.read())
        except urllib.error.HTTPError as exc:
            body = exc.read().decode(errors="replace")[:200]
            raise RuntimeError(f"{url}: HTTP {exc.code}: {body}") from None
        except urllib.error.URLError as exc:
            raise RuntimeError(f"{url}: {exc.reason}") from None

    def _complete(self, source: str, n: int, sampling: Sampling) -> list[str]:
        answers: list[str] = []
        while len(answers) < n:
            payload = {
                "model": self.model,
                "messages": build_messages(source),
                "n": n - len(answers),
                "temperature": sampling.temperature,
                "top_p": sampling.top_p,
                "max_tokens": sampling.max_new_tokens,
            }
            if sampling.seed is not None:
                payload["seed"] = sampling.seed
            choices = self._post(payload).get("choices") or []
            if not choices:
                raise RuntimeError(f"{self.base_url}: response has no choices")
            answers += [c.get("message", {}).get("content") or "" for c in choices]
        return answers[:n]

    def generate(self, sources: Sequence[str], n: int, sampling: Sampling) -> list[list[str]]:
        return [self._complete(s, n, sampling) for s in sources]


def parse_policy_spec(spec: str) -> tuple[str, tuple[str, ...]]:
    """``compiler``, ``hf:MODEL_DIR`` or ``openai:BASE_URL#MODEL`` -> (kind, arguments)."""
    kind, _, rest = spec.partition(":")
    if spec == "compiler":
        return "compiler", ()
    if kind == "hf" and rest:
        return "hf", (rest,)
    if kind == "openai" and "#" in rest:
        url, _, model = rest.rpartition("#")
        return "openai", (url, model)
    raise ValueError(
        f"unknown policy {spec!r}; use compiler, hf:MODEL_DIR or openai:BASE_URL#MODEL"
    )


def load_policy(spec: str, device: str = "cpu", mode: str = "strict",
                precision: str = "fp32", sampling: Sampling | None = None,
                batch_size: int = 4) -> Policy:
    """The policy a spec names (see ``parse_policy_spec``), on ``device``; ``mode`` and
    ``precision`` (the judge's) apply to the compiler, ``sampling`` and ``batch_size``
    (prompts per ``generate`` call) to a local model."""
    kind, args = parse_policy_spec(spec)
    if kind == "compiler":
        from drtriton.compiler.tune import default_tuning_cache

        return CompilerPolicy(device=device_kind(device), mode=mode, precision=precision,
                              tuning_cache=str(default_tuning_cache()))
    if kind == "hf":
        return HFPolicy(args[0], device=device, batch_size=batch_size, sampling=sampling)
    return OpenAIPolicy(*args)
