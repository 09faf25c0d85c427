"""The whole loop with real actors: scheduler, workers, generator, learner, simulated sandboxes."""

from __future__ import annotations

from pathlib import Path

import pytest

from actors.learner import (
    GetLearnerStatistics,
    Learner,
    LearnerConfig,
    ScoredGroup,
    SetCurriculumState,
    Trajectory,
    load_checkpoint,
)
from policies.neural import generate
from policies.staleness import StalenessBook
from roost.bench.asynchrony import run_side
from runtime import ActorSystem
from runtime.distributions import Distribution
from tests.learning._tiny import REAL, tiny_policy

pytestmark = [pytest.mark.anyio, pytest.mark.parametrize("anyio_backend", [REAL])]


@pytest.mark.parametrize("k", [0, 2])
async def test_the_loop_trains_within_the_staleness_bound(k: int) -> None:
    result = await run_side(
        k,
        steps=4,
        group_size=2,
        groups_per_step=2,
        workers=16,
        exec_latency=Distribution(dist="lognormal", median=0.01, sigma=1.0, cap=0.5),
    )
    assert result["trajectories"] == 16
    assert result["dropped_stale"] == 0
    assert result["max_staleness"] <= k
    if k == 0:
        assert set(result["staleness_histogram"]) == {"0"}


async def test_the_learner_actor_checkpoints_every_n_steps(tmp_path: Path) -> None:
    policy = tiny_policy()
    config = LearnerConfig(batch_size=4, k=1, checkpoint_every=2, checkpoint_dir=str(tmp_path))
    book = StalenessBook(1, 4)
    async with ActorSystem(lag_interval=None) as system:
        learner = system.spawn(lambda: Learner(policy, config, book=book), name="learner")
        await learner.tell(SetCurriculumState(blob=b"levels=1,2"))
        sampler = tiny_policy(seed=5)  # the learner's model is busy in its thread
        for step in range(4):
            samples = generate(sampler, [[257, 97, 61]] * 4, max_new_tokens=3, seed=step)
            group = [
                # as if sampled at the version the learner is at: within the bound
                Trajectory(
                    f"r{step}-{i}",
                    [257, 97, 61],
                    s.tokens,
                    s.logprobs,
                    [step] * len(s.tokens),
                    i / 4,
                )
                for i, s in enumerate(samples)
            ]
            await learner.tell(ScoredGroup(group_id=f"g{step}", trajectories=group))
        stats = await learner.ask(GetLearnerStatistics(), timeout=60)
    assert stats.version == 4
    assert stats.checkpoints == 2
    assert book.version == 4
    ckpt = load_checkpoint(tmp_path)
    assert ckpt.version == 4
    assert ckpt.curriculum == b"levels=1,2"
    assert len(ckpt.consumed) == 16
