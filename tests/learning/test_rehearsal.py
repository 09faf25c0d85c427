"""Rehearsal: the demonstrations' likelihood as a term of the RL step (PPO-ptx)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from actors._learner_core import LearnerConfig, LearnerCore, Trajectory, load_checkpoint
from tests.learning._tiny import tiny_policy

PROMPT = [257, 120, 61]  # BOS "x="
DEMO = [97, 98, 99, 10]  # "abc\n"
OTHER_PROMPT = [257, 121, 61]  # BOS "y="
OTHER_DEMO = [100, 101, 10]  # "de\n"
DEMOS = [(PROMPT, DEMO), (OTHER_PROMPT, OTHER_DEMO)]


def _flat_group() -> list[list[Trajectory]]:
    # Equal rewards: every GRPO advantage is 0, so without rehearsal a step moves nothing.
    return [
        [Trajectory(f"e{i}", PROMPT, [110 + i, 10], [-1.0, -1.0], [0, 0], 0.0) for i in range(4)]
    ]


def _likelihood(core: LearnerCore, prompt: list[int], completion: list[int]) -> float:
    with torch.no_grad():
        logp, mask = core.policy.token_logprobs([prompt], [completion])
    return float((logp * mask).sum())


def test_rehearsal_raises_the_demonstrations_likelihood_where_the_policy_gradient_is_zero() -> None:
    config = LearnerConfig(batch_size=4, lr=1e-2, demo_coef=1.0, demo_batch=4)
    core = LearnerCore(tiny_policy(seed=1), config, demonstrations=DEMOS)
    start = [_likelihood(core, p, c) for p, c in DEMOS]
    first = core.update(_flat_group())
    for _ in range(4):
        last = core.update(_flat_group())
    assert first.demo_loss > 0  # a negative log-likelihood per token
    assert last.demo_loss < first.demo_loss
    end = [_likelihood(core, p, c) for p, c in DEMOS]
    assert all(e > s + 0.5 for s, e in zip(start, end, strict=True))


def test_without_rehearsal_the_same_steps_leave_the_weights_and_report_no_term() -> None:
    core = LearnerCore(tiny_policy(seed=1), LearnerConfig(batch_size=4, lr=1e-2))
    before = {k: v.clone() for k, v in core.policy.state_dict().items()}
    stats = core.update(_flat_group())
    assert stats.demo_loss == 0.0
    assert all(torch.equal(before[k], v) for k, v in core.policy.state_dict().items())


def test_the_draws_of_demonstrations_resume_exactly(tmp_path: Path) -> None:
    config = LearnerConfig(batch_size=4, lr=1e-2, demo_coef=0.5, demo_batch=1)
    core = LearnerCore(tiny_policy(seed=3), config, demonstrations=DEMOS)
    core.update(_flat_group())
    ckpt = load_checkpoint(core.save(tmp_path))
    for _ in range(3):
        core.update(_flat_group())
    resumed = LearnerCore(tiny_policy(seed=42), config, resume=ckpt, demonstrations=DEMOS)
    for _ in range(3):
        resumed.update(_flat_group())
    got, want = resumed.policy.state_dict(), core.policy.state_dict()
    assert all(torch.equal(got[k], want[k]) for k in want)


@pytest.mark.parametrize(
    ("config", "demonstrations", "message"),
    [
        (LearnerConfig(demo_coef=-1.0), DEMOS, "demo_coef must be >= 0, got -1"),
        (LearnerConfig(demo_coef=1.0, demo_batch=0), DEMOS, "demo_batch must be >= 1, got 0"),
        (LearnerConfig(demo_coef=1.0), [], "demo_coef > 0 needs demonstrations"),
        (LearnerConfig(demo_coef=1.0), [(PROMPT, [])], "demonstration 0: empty prompt or"),
    ],
    ids=["negative", "empty-batch", "none-given", "empty-completion"],
)
def test_bad_rehearsal_settings_are_refused(
    config: LearnerConfig, demonstrations: list[tuple[list[int], list[int]]], message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        LearnerCore(tiny_policy(seed=0), config, demonstrations=demonstrations)
