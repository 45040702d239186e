"""Policy-gradient objectives on flat batches of answers: DRPO (default), GRPO (ablation).

DRPO (decoupled rewards): per program q with correct answers S+ and incorrect answers S-, and
s(o) the length-normalised log-likelihood of answer o under the policy,

    J_q = sum_{o in S+} w(o) s(o)  -  tau * log sum_{o in S-} exp(s(o) / tau),
    w   = softmax over S+ of r_s / lambda          (r_s = log speedup over eager)

and the loss is  -sum_q J_q / (number of programs in the batch). Programs whose answers are all
correct or all wrong give no gradient (``all_correct="speed"`` keeps the speed signal of
all-correct programs, see ``drpo_loss``). A trust region keeps KL(pi_old || pi) under ``delta``
with the squared-hinge penalty of ``trust_region_penalty``.

Everything here is a pure function of tensors; ``drtriton.train.rl`` builds the batches.
"""

from __future__ import annotations

import math

import torch

SPEED_CLIP = math.log(10.0)  # r_s is clipped to [-log 10, log 10]


def speed_reward(speedup: float | None) -> float:
    """r_s = log(eager time / candidate time), clipped; 0 when no timing exists (CPU)."""
    if speedup is None or not math.isfinite(speedup) or speedup <= 0:
        return 0.0
    return max(-SPEED_CLIP, min(SPEED_CLIP, math.log(speedup)))


def speed_weights(speed: torch.Tensor, lam: float) -> torch.Tensor:
    """w = softmax(r_s / lambda); lambda = 0 keeps only the fastest (ties share), inf ignores
    speed."""
    if math.isinf(lam):
        return torch.full_like(speed, 1.0 / speed.numel())
    if lam == 0:
        best = (speed == speed.max()).to(speed.dtype)
        return best / best.sum()
    return torch.softmax(speed / lam, dim=0)


def drpo_loss(
    scores: torch.Tensor,
    correct: torch.Tensor,
    speed: torch.Tensor,
    group: torch.Tensor,
    lam: float = 1.0,
    tau: float = 10.0,
    all_correct: str = "drop",
) -> torch.Tensor:
    """The DRPO loss of a flat batch of answers (differentiable in ``scores``).

    scores: s(o) per answer (float); correct: bool per answer; speed: r_s per answer (ignored for
    incorrect answers); group: program index per answer (any integers). The sum of J_q over
    programs with both correct and incorrect answers is divided by the number of distinct
    programs in the batch. ``all_correct="speed"`` adds, for programs whose answers are all
    correct, sum_{S+} (w - 1/|S+|) s: it moves likelihood towards the faster answers without
    raising the group's mean likelihood (zero when the speeds are equal, e.g. on a CPU).
    """
    if all_correct not in ("drop", "speed"):
        raise ValueError(f"all_correct must be drop or speed, got {all_correct!r}")
    correct = correct.bool()
    speed = speed.to(scores.dtype).detach()
    groups = torch.unique(group)
    total = scores.new_zeros(())
    for g in groups:
        in_group = group == g
        pos = in_group & correct
        neg = in_group & ~correct
        if pos.any() and neg.any():
            w = speed_weights(speed[pos], lam)
            total = total + (w * scores[pos]).sum()
            total = total - tau * torch.logsumexp(scores[neg] / tau, dim=0)
        elif pos.any() and all_correct == "speed":
            w = speed_weights(speed[pos], lam)
            total = total + ((w - 1.0 / w.numel()) * scores[pos]).sum()
    return -total / max(1, groups.numel())


def groups_with_signal(correct: torch.Tensor, group: torch.Tensor) -> tuple[int, int]:
    """(programs with both correct and incorrect answers, programs with all answers correct)."""
    mixed = full = 0
    for g in torch.unique(group):
        c = correct[group == g].bool()
        mixed += int(c.any() and not c.all())
        full += int(c.all())
    return mixed, full


def sequence_scores(token_logps: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """s(o): the mean log-probability of each answer's tokens (rows: answers)."""
    mask = mask.to(token_logps.dtype)
    return (token_logps * mask).sum(-1) / mask.sum(-1).clamp(min=1.0)


def kl_coefficient(kl: float, beta: float, delta: float) -> float:
    """beta * [kl - delta]_+ : the (constant) factor of the trust-region penalty."""
    return beta * max(0.0, kl - delta)


def token_kl(token_logps: torch.Tensor, old_token_logps: torch.Tensor) -> torch.Tensor:
    """Per-token estimate of KL(pi_old || pi) from answers sampled by pi_old: with
    d = log pi - log pi_old, exp(d) - 1 - d ("k3"). Unbiased like the plain -d, but never negative
    and with zero gradient at pi = pi_old: the plain estimate went negative on the H200 run
    (mean -0.002 to -0.004 per step), which hides real drift from a hinge at delta."""
    d = token_logps - old_token_logps.detach()
    return torch.expm1(d) - d


def trust_region_penalty(
    token_logps: torch.Tensor,
    old_token_logps: torch.Tensor,
    mask: torch.Tensor,
    beta: float = 1e3,
    delta: float = 1e-4,
) -> tuple[torch.Tensor, torch.Tensor]:
    """(penalty, kl): KL(pi_old || pi) as the token mean of ``token_kl`` over the batch; the
    penalty is beta * [kl - delta]_+ (a constant) * kl, whose gradient is that of
    (beta / 2) [kl - delta]_+^2.
    """
    mask = mask.to(token_logps.dtype)
    kl = (token_kl(token_logps, old_token_logps) * mask).sum() / mask.sum().clamp(min=1.0)
    return kl_coefficient(float(kl.detach()), beta, delta) * kl, kl.detach()


def grpo_advantages(rewards: torch.Tensor, group: torch.Tensor) -> torch.Tensor:
    """GRPO advantages: rewards normalised within each program's group (zero when all equal)."""
    rewards = rewards.to(torch.float32)
    adv = torch.zeros_like(rewards)
    for g in torch.unique(group):
        sel = group == g
        r = rewards[sel]
        std = r.std(unbiased=False) if r.numel() > 1 else r.new_zeros(())
        adv[sel] = (r - r.mean()) / (std + 1e-4)
    return adv


def grpo_loss(
    token_logps: torch.Tensor,
    old_token_logps: torch.Tensor,
    mask: torch.Tensor,
    advantages: torch.Tensor,
    clip_eps: float = 0.2,
) -> torch.Tensor:
    """GRPO (the ablation baseline): PPO-clipped token ratios times the answer's advantage,
    token mean per answer, mean over answers (separable per answer, so it can be micro-batched).
    """
    ratio = torch.exp(token_logps - old_token_logps.detach())
    a = advantages.to(token_logps.dtype)[:, None]
    per_token = -torch.minimum(ratio * a, torch.clamp(ratio, 1 - clip_eps, 1 + clip_eps) * a)
    return sequence_scores(per_token, mask).mean()
