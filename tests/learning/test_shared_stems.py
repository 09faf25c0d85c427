"""Log-probabilities over shared prompt stems: the same values and gradients as whole passes."""

from __future__ import annotations

import random

import pytest
import torch

from actors._grpo import LossConfig
from actors._learner_core import LearnerConfig, LearnerCore, Trajectory
from policies.transformer import MIN_STEM, TransformerConfig, TransformerPolicy, shared_stems


def _policy() -> TransformerPolicy:
    config = TransformerConfig(d_model=32, n_layers=2, n_heads=2, max_len=128)
    return TransformerPolicy(config, device="cpu", seed=3)


def _group_batch(
    rng: random.Random,
) -> tuple[list[list[int]], list[list[int]], list[int]]:
    """Two tasks' groups (first attempts at the task's prompt, and revisions: the prompt plus
    feedback) and a group of one, in a shuffled order; completions of varied length, some
    empty."""
    rows: list[tuple[list[int], int]] = []
    for group in range(2):
        task = [257] + [rng.randrange(32, 127) for _ in range(rng.randrange(20, 30))]
        rows += [(task, group)] * 3
        for _ in range(2):
            feedback = [rng.randrange(32, 127) for _ in range(rng.randrange(1, 40))]
            rows.append((task + feedback, group))
    rows.append(([257, 40, 41], 2))
    rng.shuffle(rows)
    prompts = [p for p, _ in rows]
    completions = [[rng.randrange(32, 127) for _ in range(rng.randrange(0, 9))] for _ in rows]
    completions[0] = [rng.randrange(32, 127) for _ in range(5)]
    return prompts, completions, [g for _, g in rows]


def _logprobs_and_grads(
    policy: TransformerPolicy,
    prompts: list[list[int]],
    completions: list[list[int]],
    groups: list[int] | None,
) -> tuple[torch.Tensor, torch.Tensor, list[torch.Tensor]]:
    for p in policy.parameters():
        p.grad = None
    logp, mask = policy.token_logprobs(prompts, completions, temperature=0.7, groups=groups)
    weights = torch.linspace(-1.0, 1.0, logp.numel()).view_as(logp)
    (logp * mask * weights).sum().backward()
    grads = [p.grad.clone() for p in policy.parameters() if p.grad is not None]
    return logp.detach(), mask, grads


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_stem_passes_give_the_whole_passes_values_and_gradients(seed: int) -> None:
    policy = _policy()
    prompts, completions, groups = _group_batch(random.Random(seed))
    stems, _ = shared_stems(prompts, groups)
    assert sum(1 for s in stems if s) == 2  # the two tasks' stems; the group of one has none

    whole, whole_mask, whole_grads = _logprobs_and_grads(policy, prompts, completions, None)
    stemmed, stemmed_mask, stemmed_grads = _logprobs_and_grads(policy, prompts, completions, groups)

    assert torch.equal(whole_mask, stemmed_mask)
    assert whole_mask.sum() == sum(len(c) for c in completions)
    torch.testing.assert_close(stemmed, whole, atol=1e-5, rtol=1e-5)
    assert len(stemmed_grads) == len(whole_grads) > 0
    for got, want in zip(stemmed_grads, whole_grads, strict=True):
        torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-4)


def test_a_groups_stem_is_what_its_prompts_share_less_a_token_of_each() -> None:
    task = list(range(100, 130))
    other = list(range(40, 70))
    prompts = [[*task, 1, 2], task, other, [*task, 1, 3], [5, 6, 7], [*other, 9]]
    stems, which = shared_stems(prompts, [0, 0, 1, 0, 2, 1])
    assert which[0] == which[1] == which[3] != which[2] == which[5]
    assert stems[which[0]] == task[:-1]  # the prompt's last token predicts the completion
    assert stems[which[2]] == other[:-1]
    assert stems[which[4]] == []  # a group of one: no stem
    for prompt, g in zip(prompts, which, strict=True):
        assert prompt[: len(stems[g])] == stems[g]
        assert len(stems[g]) < len(prompt)


def test_a_short_stem_is_not_worth_a_pass_and_labels_must_match() -> None:
    prompts = [[1] * (MIN_STEM - 1) + [2, 3], [1] * (MIN_STEM - 1) + [4, 5]]
    stems, _ = shared_stems(prompts, [0, 0])
    assert not any(stems)
    with pytest.raises(ValueError, match="2 prompts but 1 group labels"):
        shared_stems(prompts, [0])


def test_the_learners_step_is_the_same_with_and_without_shared_stems() -> None:
    # Two groups, each of first attempts and revisions at its own task's prompt, a KL anchor:
    # the learner's gradient must not depend on computing the stems once.
    rng = random.Random(5)
    prompts, completions, labels = _group_batch(rng)
    groups: dict[int, list[Trajectory]] = {}
    for i, (p, c, g) in enumerate(zip(prompts, completions, labels, strict=True)):
        groups.setdefault(g, []).append(
            Trajectory(f"g{g}/{i}", p, c, [-1.0] * len(c), [0] * len(c), rng.random())
        )

    def step(shared: bool) -> dict[str, torch.Tensor]:
        policy = _policy()
        config = LearnerConfig(max_grad_norm=1e9, shared_stems=shared, loss=LossConfig(kl_coef=0.1))
        core = LearnerCore(policy, config, reference=_policy())
        core.update(list(groups.values()))
        return {n: p.grad.clone() for n, p in policy.model.named_parameters() if p.grad is not None}

    plain, stemmed = step(False), step(True)
    assert plain
    assert plain.keys() == stemmed.keys()
    for name, value in plain.items():
        torch.testing.assert_close(stemmed[name], value, atol=1e-6, rtol=1e-4, msg=name)
