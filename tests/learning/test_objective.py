"""Advantages and importance weights against values computed by hand."""

from __future__ import annotations

import math

import msgspec
import pytest
import torch

from actors._grpo import LossConfig, grpo_advantages, grpo_loss
from actors._learner_core import Trajectory, group_advantages, turn_of
from policies.staleness import DecoupledPPO, TruncatedIS, make_correction
from policies.transformer import TransformerPolicy
from tests.learning._tiny import tiny_policy


def test_group_relative_advantages_are_standardized_within_the_group() -> None:
    # mean 0.5, population std 0.5
    assert grpo_advantages([1.0, 0.0, 0.0, 1.0]) == pytest.approx([1, -1, -1, 1], abs=1e-5)
    # mean 2, std sqrt(2/3)
    s = math.sqrt(2 / 3)
    assert grpo_advantages([1.0, 2.0, 3.0]) == pytest.approx([-1 / s, 0, 1 / s], abs=1e-5)


def test_a_group_with_equal_rewards_has_no_signal() -> None:
    assert grpo_advantages([0.7, 0.7, 0.7]) == [0.0, 0.0, 0.0]
    assert grpo_advantages([]) == []
    assert grpo_advantages([0.7, 0.7], scale="none") == [0.0, 0.0]


def test_unscaled_advantages_keep_the_rewards_units() -> None:
    # Seven passes and one failure: std 0.33, so GRPO pushes the failure down 2.65 times
    # as hard as a balanced group's; without the division it is r - mean.
    rewards = [1.0] * 7 + [0.0]
    assert grpo_advantages(rewards, scale="none") == pytest.approx([0.125] * 7 + [-0.875])
    assert grpo_advantages(rewards)[-1] == pytest.approx(-0.875 / math.sqrt(7 / 64), abs=1e-4)
    with pytest.raises(ValueError, match="advantage scale 'max'"):
        grpo_advantages(rewards, scale="max")


def _t(*values: float) -> torch.Tensor:
    return torch.tensor([list(values)])


def test_truncated_is_clips_and_truncates_the_behaviour_ratio() -> None:
    corr = TruncatedIS(eps=0.2, cap=2.0)
    logp = _t(math.log(1.5), math.log(1.5), math.log(3.0), math.log(0.5))
    behaviour = _t(0.0, 0.0, 0.0, 0.0)
    adv = _t(1.0, -1.0, -1.0, 1.0)
    out = corr.surrogate(logp, behaviour, None, adv)
    # r = 1.5, A = +1: min(1.5, clip 1.2) = 1.2 (clipped)
    # r = 1.5, A = -1: min(-1.5, -1.2) = -1.5
    # r = 3.0, A = -1: min(min(3, cap 2) * -1, 1.2 * -1) = -2 (truncated)
    # r = 0.5, A = +1: min(0.5, 0.8) = 0.5
    assert out.objective.tolist()[0] == pytest.approx([1.2, -1.5, -2.0, 0.5])
    assert out.is_weight.tolist()[0] == pytest.approx([1.5, 1.5, 3.0, 0.5])
    assert out.clipped.tolist()[0] == [True, False, False, False]


def test_decoupled_objective_weights_by_proximal_over_behaviour() -> None:
    corr = DecoupledPPO(eps=0.2, cap=5.0)
    behaviour = _t(0.0, 0.0, 0.0)
    proximal = _t(math.log(2.0), math.log(0.5), math.log(8.0))
    logp = _t(math.log(2.0), math.log(0.75), math.log(8.0))
    adv = _t(1.0, 1.0, -1.0)
    out = corr.surrogate(logp, behaviour, proximal, adv)
    # w = 2, u = 1: 2 * 1 = 2
    # w = 0.5, u = 1.5: 0.5 * min(1.5, 1.2) = 0.6 (clipped)
    # w = min(8, cap 5) = 5, u = 1, A = -1: -5
    assert out.objective.tolist()[0] == pytest.approx([2.0, 0.6, -5.0])
    assert out.is_weight.tolist()[0] == pytest.approx([2.0, 0.5, 5.0])
    assert out.clipped.tolist()[0] == [False, True, False]


def test_the_decoupled_weight_carries_no_gradient() -> None:
    logp = torch.tensor([[0.1]], requires_grad=True)
    out = DecoupledPPO().surrogate(logp, _t(0.0), _t(0.3), _t(1.0))
    out.objective.sum().backward()  # type: ignore[no-untyped-call]
    # d/dlogp [w * u * A] with u = exp(logp - prox), w = exp(0.3) constant
    expected = math.exp(0.3) * math.exp(0.1 - 0.3)
    assert logp.grad is not None
    assert logp.grad.item() == pytest.approx(expected, rel=1e-5)


def test_corrections_are_chosen_by_name() -> None:
    assert isinstance(make_correction("truncated_is"), TruncatedIS)
    assert isinstance(make_correction("decoupled", cap=3.0), DecoupledPPO)
    with pytest.raises(ValueError, match="truncated_is, decoupled"):
        make_correction("vtrace")


def test_the_loss_takes_the_proximal_policy_from_its_own_forward_pass() -> None:
    # The loss reuses its forward pass as the proximal policy (one step per batch, no dropout).
    # The gradient must equal the one from a second, separate forward pass of the same weights.
    policy = tiny_policy(seed=3)
    prompts = [[257, 97, 61], [257, 98, 61, 99]]
    completions = [[100, 101, 102], [103, 104]]
    behaviour = [[-5.0, -5.5, -6.0], [-4.0, -5.0]]
    advantages = [1.0, -1.0]
    policy.train(True)
    loss, _ = grpo_loss(
        policy, prompts, completions, behaviour, advantages, DecoupledPPO(), LossConfig()
    )
    (grad,) = torch.autograd.grad(loss, [next(policy.parameters())])

    logp, mask = policy.token_logprobs(prompts, completions)
    with torch.no_grad():
        proximal, _ = policy.token_logprobs(prompts, completions)
    width = logp.shape[1]
    padded = torch.tensor([b + [0.0] * (width - len(b)) for b in behaviour])
    adv = torch.tensor(advantages).unsqueeze(1).expand_as(logp)
    sur = DecoupledPPO().surrogate(logp, padded, proximal, adv)
    reference = -(sur.objective * mask).sum() / mask.sum()
    (expected,) = torch.autograd.grad(reference, [next(policy.parameters())])
    assert float(loss.detach()) == pytest.approx(float(reference.detach()), rel=1e-6)
    assert torch.allclose(grad, expected, atol=1e-7)
    assert grad.abs().sum() > 0


def test_negative_weight_scales_only_negative_advantages() -> None:
    policy = tiny_policy(seed=5)
    prompts = [[257, 97, 61], [257, 98, 61], [257, 99, 61]]
    completions = [[100, 101], [102, 103], [104, 105]]
    behaviour = [[-5.0, -5.0], [-5.0, -5.0], [-5.0, -5.0]]

    def loss(advantages: list[float], weight: float) -> float:
        value, _ = grpo_loss(
            policy,
            prompts,
            completions,
            behaviour,
            advantages,
            DecoupledPPO(),
            LossConfig(negative_weight=weight),
        )
        return float(value.detach())

    assert loss([1.0, -2.0, 1.0], 0.25) == pytest.approx(loss([1.0, -0.5, 1.0], 1.0), rel=1e-6)
    assert loss([1.0, -2.0, 1.0], 0.0) == pytest.approx(loss([1.0, 0.0, 1.0], 1.0), rel=1e-6)
    assert loss([1.0, -2.0, 1.0], 0.25) != pytest.approx(loss([1.0, -2.0, 1.0], 1.0), rel=1e-3)


def _kl_loss(
    policy: TransformerPolicy, reference: TransformerPolicy, behaviour: list[list[float]]
) -> torch.Tensor:
    """The loss with zero advantages: only the KL term is left (times kl_coef = 1)."""
    loss, _ = grpo_loss(
        policy,
        KL_PROMPTS,
        KL_COMPLETIONS,
        behaviour,
        [0.0] * len(KL_PROMPTS),
        DecoupledPPO(cap=5.0),
        LossConfig(kl_coef=1.0),
        reference,
    )
    return loss


KL_PROMPTS = [[257, 97, 61], [257, 98, 61, 99]]
KL_COMPLETIONS = [[100, 101, 102], [103, 104, 105]]


def test_the_kl_term_is_importance_weighted_by_current_over_behaviour() -> None:
    policy, reference = tiny_policy(seed=1), tiny_policy(seed=2)
    with torch.no_grad():
        cur, _ = policy.token_logprobs(KL_PROMPTS, KL_COMPLETIONS)
        ref, _ = reference.token_logprobs(KL_PROMPTS, KL_COMPLETIONS)
    # Fresh samples (behaviour = current): weight 1, the plain k3 estimator.
    delta = ref - cur
    k3 = torch.exp(delta) - delta - 1
    assert float(_kl_loss(policy, reference, cur.tolist()).detach()) == pytest.approx(
        float(k3.mean()), rel=1e-5
    )
    # Stale samples drawn by the reference: each token weighs pi_theta / mu (capped at 5).
    weight = torch.exp(cur - ref).clamp(max=5.0)
    assert float(_kl_loss(policy, reference, ref.tolist()).detach()) == pytest.approx(
        float((weight * k3).mean()), rel=1e-5
    )


class _FixedLogprobs:
    """Stands in for a policy: returns given log-probabilities (a leaf, to read its gradient)."""

    device = torch.device("cpu")

    def __init__(self, logp: torch.Tensor) -> None:
        self.logp = logp

    def token_logprobs(
        self,
        prompts: object,
        completions: object,
        temperature: float = 1.0,
        groups: object = None,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        return self.logp, torch.ones_like(self.logp)


def test_a_stale_token_the_policy_has_pushed_down_does_not_swamp_the_kl_gradient() -> None:
    # The reference sampled these tokens and likes them (log-prob -1); the current policy has
    # since pushed them 10 nats down. Unweighted, each would pull back with force e^10; weighted
    # by pi_theta / mu the force per token is 1 - e^-10, as for any token the policy dislikes.
    ref = torch.full((2, 3), -1.0)
    cur = torch.full((2, 3), -11.0, requires_grad=True)
    loss, stats = grpo_loss(
        _FixedLogprobs(cur),  # type: ignore[arg-type]
        [[1]] * 2,
        [[1, 2, 3]] * 2,
        ref.tolist(),
        [0.0, 0.0],
        DecoupledPPO(),
        LossConfig(kl_coef=1.0),
        _FixedLogprobs(ref),  # type: ignore[arg-type]
    )
    (grad,) = torch.autograd.grad(loss, [cur])
    per_token = grad * cur.numel()  # the loss is a mean over tokens
    assert per_token.abs().max() == pytest.approx(1 - math.exp(-10), rel=1e-4)
    assert stats.kl_reference < 1.0


def _sample(rollout_id: str, reward: float) -> Trajectory:
    return Trajectory(rollout_id, [1], [2], [-0.5], [0], reward)


def test_a_turn_baseline_compares_each_turn_with_the_same_turn_only() -> None:
    # Four first attempts (two pass); the two that failed were revised, one successfully.
    group = [
        _sample("g/0#0", 1.0),
        _sample("g/1#0", 0.0),
        _sample("g/1#1", 0.9),
        _sample("g/2#0", 1.0),
        _sample("g/3#0", 0.0),
        _sample("g/3#1", 0.0),
    ]
    assert [turn_of(t.rollout_id) for t in group] == [0, 0, 1, 0, 0, 1]
    assert turn_of("episode-without-turns") == 0
    per_turn = group_advantages(group, "turn")
    assert per_turn == pytest.approx([1, -1, 1, 1, -1, -1], abs=1e-5)
    # The group's mean is lower than the first attempts' own: they all gain, whatever they did.
    whole = group_advantages(group, "group")
    assert whole == pytest.approx(grpo_advantages([t.reward for t in group]))
    first = [a for t, a in zip(group, whole, strict=True) if turn_of(t.rollout_id) == 0]
    assert sum(first) > 0.1
    assert sum(a for t, a in zip(group, per_turn, strict=True) if t.rollout_id.endswith("#0")) == (
        pytest.approx(0, abs=1e-6)
    )
    # A revision with no other sample of its turn has nothing to be compared with.
    assert group_advantages([*group[:2], _sample("g/1#2", 0.8)], "turn")[2] == 0.0


@pytest.mark.parametrize("baseline", ["group", "turn"])
@pytest.mark.parametrize("scale", ["std", "none"])
def test_a_hindsight_sample_does_not_move_its_groups_own_advantages(
    baseline: str, scale: str
) -> None:
    # Eight first attempts, one pass; a failed one also passed another task's tests.
    group = [_sample("g/0#0", 1.0), *(_sample(f"g/{i}#0", 0.0) for i in range(1, 8))]
    guest = msgspec.structs.replace(group[3], reward=1.0, relabelled=True, goal="gen-L3-x-solved")
    alone = group_advantages(group, baseline, scale)
    hosted = group_advantages([*group, guest], baseline, scale)
    # The group's own samples keep their advantages (they still sum to 0 on their prompt)...
    assert hosted[:8] == pytest.approx(alone, abs=1e-6)
    assert sum(hosted[:8]) == pytest.approx(0, abs=1e-6)
    # ... and the guest is judged against the group with it, as a pass there.
    assert hosted[8] == pytest.approx(grpo_advantages([1.0, *[0.0] * 7, 1.0], scale=scale)[8])
    # In a group with no pass of its own, only the guest has an advantage.
    failed = [_sample(f"g/{i}#0", 0.0) for i in range(8)]
    assert group_advantages([*failed, guest], baseline, scale)[:8] == [0.0] * 8


def test_a_relabelled_sample_trains_with_importance_weight_one() -> None:
    # Its recorded log-probabilities belong to another prompt (here absurdly low): the
    # current weights' stand in, so neither the weight nor the clip sees them.
    policy = tiny_policy(seed=1)
    prompts, completions = [[257, 120], [257, 121]], [[97, 98, 99], [97, 98]]
    bogus = [[-30.0] * 3, [-30.0] * 2]
    _, plain = grpo_loss(
        policy, prompts, completions, bogus, [1.0, -1.0], DecoupledPPO(), LossConfig()
    )
    _, relabelled = grpo_loss(
        policy,
        prompts,
        completions,
        bogus,
        [1.0, -1.0],
        DecoupledPPO(),
        LossConfig(),
        relabelled=[True, True],
    )
    assert plain.is_weight_max == pytest.approx(5.0)  # capped: the bogus values counted
    assert relabelled.is_weight_max == pytest.approx(1.0)
    assert relabelled.is_weight_min == pytest.approx(1.0)
