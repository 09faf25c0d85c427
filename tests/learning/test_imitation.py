"""Self-imitation: which samples are kept, what the term trains, and that it resumes exactly."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
import torch

from actors._imitation import ImitationBuffer
from actors._learner_core import LearnerConfig, LearnerCore, Trajectory, load_checkpoint
from tests.learning._tiny import tiny_policy

PROMPT = [257, 120, 61]  # BOS "x="
SUCCESS = [97, 98, 99, 10]  # "abc\n"


def _sample(name: str, completion: list[int], reward: float) -> Trajectory:
    n = len(completion)
    return Trajectory(name, PROMPT, completion, [-1.0] * n, [0] * n, reward)


def _likelihood(core: LearnerCore, completion: list[int]) -> float:
    with torch.no_grad():
        logp, mask = core.policy.token_logprobs([PROMPT], [completion])
    return float((logp * mask).sum())


def test_the_buffer_keeps_positive_advantages_only_and_drops_the_oldest() -> None:
    buffer = ImitationBuffer(3, random.Random(0))
    added = buffer.add([PROMPT] * 4, [[1], [2], [], [3]], [1.5, -0.5, 2.0, 0.0])
    assert added == 1  # [2] is below its baseline, [] is empty, [3] only equals it
    assert [k.completion for k in buffer.kept] == [(1,)]
    buffer.add([PROMPT] * 3, [[4], [5], [6]], [0.1, 0.2, 0.3])
    assert [k.completion for k in buffer.kept] == [(4,), (5,), (6,)]
    drawn = buffer.draw(2)
    assert len(drawn) == 2
    assert len(set(drawn)) == 2
    assert len(buffer.draw(10)) == 3
    with pytest.raises(ValueError, match="capacity must be >= 1"):
        ImitationBuffer(0, random.Random(0))


def test_a_step_without_policy_gradient_still_imitates_a_kept_success() -> None:
    # Equal rewards: every GRPO advantage is 0 and, with a fresh Adam, a plain step moves
    # nothing. The kept success is then the only gradient, and its likelihood must rise.
    flat = [[_sample(f"e{i}", [100 + i, 10], 0.0) for i in range(4)]]
    plain = LearnerCore(tiny_policy(seed=1), LearnerConfig(batch_size=4, lr=1e-2))
    before = {k: v.clone() for k, v in plain.policy.state_dict().items()}
    plain.update(flat)
    assert all(torch.equal(before[k], v) for k, v in plain.policy.state_dict().items())

    core = LearnerCore(
        tiny_policy(seed=1), LearnerConfig(batch_size=4, lr=1e-2, imitation_coef=1.0)
    )
    core.imitation.restore([(PROMPT, SUCCESS, 2.0)])
    start = _likelihood(core, SUCCESS)
    for _ in range(3):
        core.update(flat)
    assert _likelihood(core, SUCCESS) > start + 0.5


def test_a_group_success_joins_the_buffer_and_the_buffer_survives_a_resume(
    tmp_path: Path,
) -> None:
    config = LearnerConfig(batch_size=4, lr=1e-2, imitation_coef=1.0, imitation_batch=2)
    core = LearnerCore(tiny_policy(seed=3), config)
    group = [_sample("a", SUCCESS, 1.0), *(_sample(f"b{i}", [120, 10], 0.0) for i in range(3))]
    stats = core.update([group])
    assert [k.completion for k in core.imitation.kept] == [tuple(SUCCESS)]
    assert stats.imitation_kept == 1
    assert stats.imitation_loss > 0  # a negative log-likelihood, weighted by a positive advantage

    ckpt = load_checkpoint(core.save(tmp_path))
    assert ckpt.imitation == core.imitation.state()
    second = [[_sample("c", [121, 10], 1.0), _sample("d", [122, 10], 0.0)]]
    core.update(second)
    resumed = LearnerCore(tiny_policy(seed=42), config, resume=ckpt)
    resumed.update(second)
    assert resumed.imitation.state() == core.imitation.state()
    got, want = resumed.policy.state_dict(), core.policy.state_dict()
    assert all(torch.equal(got[k], want[k]) for k in want)


def test_a_negative_coefficient_is_refused() -> None:
    with pytest.raises(ValueError, match="imitation_coef must be >= 0, got -1"):
        LearnerCore(tiny_policy(seed=0), LearnerConfig(imitation_coef=-1.0))
