"""DRPO / GRPO / trust-region losses (pure functions) and the RL loop's exact micro-batching."""

import math

import pytest
import torch

from drtriton.train.drpo import (
    SPEED_CLIP,
    drpo_loss,
    groups_with_signal,
    grpo_advantages,
    grpo_loss,
    sequence_scores,
    speed_reward,
    speed_weights,
    trust_region_penalty,
)
from drtriton.train.rl import Curriculum, build_batch


def test_drpo_loss_hand_computed():
    # Program 0: correct answers s = -1 (2x faster, r_s = log 2) and -2 (r_s = 0); incorrect
    # answers s = -3, -4. Program 1: all answers incorrect (no signal).
    # w = softmax([log 2, 0]) = [2/3, 1/3]; sum w s = -2/3 - 2/3 = -4/3.
    # tau log(e^{-3/10} + e^{-4/10}) = 10 log(0.740818 + 0.670320) = 3.443967.
    # J_0 = -4/3 - 3.443967 = -4.777300; loss = -J_0 / 2 programs = 2.388650.
    scores = torch.tensor([-1.0, -2.0, -3.0, -4.0, -0.5, -0.7], requires_grad=True)
    correct = torch.tensor([True, True, False, False, False, False])
    speed = torch.tensor([math.log(2.0), 0.0, 5.0, 5.0, 0.0, 0.0])  # incorrect speeds ignored
    group = torch.tensor([0, 0, 0, 0, 1, 1])
    loss = drpo_loss(scores, correct, speed, group, lam=1.0, tau=10.0)
    assert loss.item() == pytest.approx(2.388650, abs=1e-6)
    loss.backward()
    # d loss / d s: -w/2 on S+, +softmax(s/tau)/2 on S- = [0.262490, 0.237510]; 0 for program 1.
    expected = [-1 / 3, -1 / 6, 0.262490, 0.237510, 0.0, 0.0]
    assert scores.grad.tolist() == pytest.approx(expected, abs=1e-6)


def test_drpo_no_signal_groups_give_no_gradient_but_count_in_denominator():
    scores = torch.tensor([-1.0, -2.0, -1.0, -2.0], requires_grad=True)
    correct = torch.tensor([True, True, False, False])
    group = torch.tensor([3, 3, 7, 7])  # all correct / all wrong
    loss = drpo_loss(scores, correct, torch.zeros(4), group)
    assert loss.item() == 0.0
    assert not loss.requires_grad or torch.autograd.grad(loss, scores)[0].abs().sum() == 0
    one = drpo_loss(scores[:2].detach(), torch.tensor([True, False]), torch.zeros(2), group[:2])
    mixed = drpo_loss(
        scores.detach(), torch.tensor([True, False, False, False]), torch.zeros(4), group
    )
    assert mixed.item() == pytest.approx(one.item() / 2)  # divided by the number of programs


def test_speed_weights_limits():
    speed = torch.tensor([0.5, 0.1, 0.5])
    assert speed_weights(speed, 0.0).tolist() == pytest.approx([0.5, 0.0, 0.5])
    assert speed_weights(speed, math.inf).tolist() == pytest.approx([1 / 3] * 3)
    assert speed_weights(speed, 1e6).tolist() == pytest.approx([1 / 3] * 3, abs=1e-6)
    w = speed_weights(speed, 1.0)
    assert w[0] > w[1] and w.sum().item() == pytest.approx(1.0)


def test_all_correct_speed_option_prefers_faster_answers_only():
    scores = torch.tensor([-1.0, -1.0], requires_grad=True)
    correct = torch.tensor([True, True])
    group = torch.tensor([0, 0])
    drop = drpo_loss(scores, correct, torch.tensor([1.0, 0.0]), group, all_correct="drop")
    assert drop.item() == 0.0
    loss = drpo_loss(scores, correct, torch.tensor([1.0, 0.0]), group, all_correct="speed")
    (grad,) = torch.autograd.grad(loss, scores)
    assert grad[0] < 0 < grad[1]  # descending raises the faster answer, lowers the slower
    assert grad.sum().item() == pytest.approx(0.0, abs=1e-7)  # group likelihood unchanged
    equal = drpo_loss(scores, correct, torch.zeros(2), group, all_correct="speed")
    assert torch.autograd.grad(equal, scores)[0].abs().max() == 0  # no speed signal on CPU


def test_speed_reward_clipped_and_missing():
    assert speed_reward(None) == 0.0
    assert speed_reward(2.0) == pytest.approx(math.log(2.0))
    assert speed_reward(1e6) == pytest.approx(SPEED_CLIP)
    assert speed_reward(1e-6) == pytest.approx(-SPEED_CLIP)


def test_trust_region_penalty_is_squared_hinge_gradient():
    new = torch.tensor([[-1.0, -2.0, 0.0], [-1.5, 0.0, 0.0]], requires_grad=True)
    old = torch.tensor([[-0.9, -1.9, 0.0], [-1.2, 0.0, 0.0]])
    mask = torch.tensor([[1.0, 1.0, 0.0], [1.0, 0.0, 0.0]])
    beta, delta = 1e3, 1e-4
    penalty, kl = trust_region_penalty(new, old, mask, beta, delta)
    # k3 per token: exp(d) - 1 - d with d = new - old = -0.1, -0.1, -0.3 (hand-computed)
    k3 = [math.exp(-0.1) - 1 + 0.1, math.exp(-0.1) - 1 + 0.1, math.exp(-0.3) - 1 + 0.3]
    assert kl.item() == pytest.approx(sum(k3) / 3)
    (g,) = torch.autograd.grad(penalty, new)
    d = new - old
    kl_t = ((torch.exp(d) - 1 - d) * mask).sum() / mask.sum()
    (ref,) = torch.autograd.grad(0.5 * beta * torch.clamp(kl_t - delta, min=0) ** 2, new)
    assert torch.allclose(g, ref)
    inside, _ = trust_region_penalty(old.clone().requires_grad_(), old, mask, beta, delta)
    assert inside.item() == 0.0


def test_token_kl_is_never_negative_where_the_plain_estimate_is():
    from drtriton.train.drpo import token_kl

    old = torch.tensor([-1.0, -2.0, -0.5])
    new = torch.tensor([-0.8, -1.9, -0.6])  # two tokens became likelier: plain -d sums to -0.2
    assert float((old - new).sum()) < 0
    per_token = token_kl(new, old)
    assert bool((per_token >= 0).all()) and float(per_token.sum()) > 0
    assert float(token_kl(old, old).abs().sum()) == 0.0


def test_grpo_advantages_and_loss():
    rewards = torch.tensor([1.0, 0.0, 1.0, 1.0])
    group = torch.tensor([0, 0, 1, 1])
    adv = grpo_advantages(rewards, group)
    assert adv[0] > 0 > adv[1] and adv[2:].abs().max() == 0
    logps = torch.full((4, 2), -1.0, requires_grad=True)
    loss = grpo_loss(logps, logps.detach(), torch.ones(4, 2), adv)
    (g,) = torch.autograd.grad(loss, logps)
    assert g[0].sum() < 0 < g[1].sum()


def test_groups_with_signal_and_sequence_scores():
    correct = torch.tensor([True, False, True, True, False, False])
    group = torch.tensor([0, 0, 1, 1, 2, 2])
    assert groups_with_signal(correct, group) == (1, 1)
    s = sequence_scores(torch.tensor([[-1.0, -3.0, -9.0]]), torch.tensor([[1.0, 1.0, 0.0]]))
    assert s.item() == pytest.approx(-2.0)


def test_curriculum_advances_on_rolling_rate():
    c = Curriculum([1, 2, 5], advance_at=0.5, window=2)
    assert not c.record(0.4)  # window not full yet
    assert not c.record(0.2) and c.level == 1  # rolling 0.3 < 0.5
    c2 = Curriculum([1, 2, 5], advance_at=0.5, window=2)
    c2.record(0.4)
    assert c2.record(0.8) and c2.level == 2 and c2.history == []
    c2.record(0.9)
    assert c2.record(0.9) and c2.level == 5
    assert not c2.record(1.0) and not c2.record(1.0) and c2.level == 5  # last level stays


def test_build_batch_aligns_completions():
    batch = build_batch([[5, 6, 7], [8]], [[1, 2], [3]], pad=0)
    assert batch["input_ids"].tolist() == [[5, 6, 7, 1, 2], [0, 0, 8, 3, 0]]
    assert batch["targets"].tolist() == [[1, 2], [3, 0]]
    assert batch["completion_mask"].tolist() == [[1, 1], [1, 0]]
    assert batch["position_ids"].tolist()[1][2:4] == [0, 1]
