"""The learner actor when its work fails: a failed update, a slow publication, a step past its
deadline. Invariant: every consumed sample is booked under exactly one version, and at k = 0
admission reopens whatever happened to the step."""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence

import anyio
import pytest
from structlog.testing import capture_logs

from actors._learner_core import StepStats
from actors.generator import WeightsPublished
from actors.learner import (
    GetLearnerStatistics,
    Learner,
    LearnerConfig,
    RolloutSettled,
    ScoredGroup,
    Trajectory,
)
from roost.train.book import TrainBook
from roost.train.rl import SURVIVE_CRASHES
from runtime import Actor, ActorSystem, handler
from tests.learning._tiny import REAL, tiny_policy

pytestmark = pytest.mark.anyio

Update = Callable[[Sequence[Sequence[Trajectory]]], StepStats]


def _group(name: str, episodes: int) -> list[Trajectory]:
    return [
        Trajectory(f"{name}-{i}", [257, 97, 61], [97, 98], [-1.0, -1.0], [0, 0], i / episodes)
        for i in range(episodes)
    ]


def _failing(update: Update, times: int) -> Update:
    """`update`, raising the first `times` calls (before touching anything, like an OOM)."""
    calls = [0]

    def call(groups: Sequence[Sequence[Trajectory]]) -> StepStats:
        calls[0] += 1
        if calls[0] <= times:
            raise RuntimeError("out of memory")
        return update(groups)

    return call


def _on_policy_learner() -> tuple[Learner, TrainBook, list[int]]:
    """A k = 0 learner stepping on 4 samples: (it, its book, the versions it booked)."""
    book = TrainBook(0, 4)
    published: list[int] = []
    learner = Learner(
        tiny_policy(), LearnerConfig(batch_size=4, k=0), book=book, on_published=published.append
    )
    return learner, book, published


@pytest.mark.parametrize("anyio_backend", [REAL])
async def test_a_failed_update_puts_its_batch_back_and_the_redelivery_retries_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The step runs on the second group's message. Before, the batch was lost: the redelivered
    # message brought back only its own group, so the first group was never trained on.
    learner, book, published = _on_policy_learner()
    monkeypatch.setattr(learner.core, "update", _failing(learner.core.update, times=1))
    with capture_logs():  # (rendering the crash's traceback costs seconds)
        async with ActorSystem(lag_interval=None, max_restarts=100) as system:
            ref = system.spawn(lambda: learner, name="learner", **SURVIVE_CRASHES)
            await ref.tell(ScoredGroup(group_id="g0", trajectories=_group("g0", 2)))
            await ref.tell(ScoredGroup(group_id="g1", trajectories=_group("g1", 2)))
            stats = await ref.ask(GetLearnerStatistics(), timeout=60)
    assert published == [1]
    assert (stats.version, stats.steps, stats.samples) == (1, 1, 4)
    assert stats.failed_steps == 1
    assert stats.duplicates == 2  # the redelivered group, already held, is not added twice
    assert stats.waiting == 0
    assert learner.core.consumed == {f"g{g}-{i}" for g in range(2) for i in range(2)}
    assert book.version == 1


@pytest.mark.parametrize("anyio_backend", [REAL])
async def test_a_step_that_keeps_failing_reopens_admission_and_keeps_its_batch(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Before, the book's k = 0 closing (set by `may_step`) stayed shut after the failure, so
    # nothing more was admitted for the rest of the run.
    learner, book, published = _on_policy_learner()
    update = learner.core.update
    monkeypatch.setattr(learner.core, "update", _failing(update, times=1_000))
    with capture_logs():
        async with ActorSystem(lag_interval=None, max_restarts=100) as system:
            ref = system.spawn(lambda: learner, name="learner", **SURVIVE_CRASHES)
            await ref.tell(ScoredGroup(group_id="g0", trajectories=_group("g0", 4)))
            failed = await ref.ask(GetLearnerStatistics(), timeout=60)
            assert book.admits(0), "the failed step left admission shut"
            monkeypatch.setattr(learner.core, "update", update)  # the fault has passed
            await ref.tell(RolloutSettled(rollout_id="other"))
            stats = await ref.ask(GetLearnerStatistics(), timeout=60)
    redeliveries = SURVIVE_CRASHES["redeliver"]
    assert (failed.version, failed.failed_steps, failed.waiting) == (0, 1 + redeliveries, 4)
    assert published == [1]
    assert (stats.version, stats.samples, stats.waiting) == (1, 4, 0)


class _SlowGenerator(Actor):
    """Takes weights, but answers the first publication only after the learner gave up on it."""

    def __init__(self, load_s: float) -> None:
        self.load_s = load_s
        self.version = 0
        self.asks = 0
        self.asked = anyio.Event()

    @handler
    async def weights_published(self, msg: WeightsPublished) -> int:
        self.asks += 1
        if self.asks == 1:
            self.asked.set()
            await anyio.sleep(self.load_s)
        self.version = max(self.version, msg.version)
        return self.version


async def test_a_publication_that_times_out_is_retried_and_the_version_booked() -> None:
    # Before, the ask's timeout crashed the step after the update was applied: the version was
    # never booked (no record of its samples), and the book never moved on.
    book = TrainBook(0, 4)
    published: list[int] = []
    done = anyio.Event()

    def on_published(version: int) -> None:
        published.append(version)
        done.set()

    generator = _SlowGenerator(load_s=3.0)
    config = LearnerConfig(batch_size=4, k=0, publish_timeout_s=2.0)
    async with ActorSystem(lag_interval=None) as system:
        gen = system.spawn(lambda: generator, name="generator")
        learner = Learner(
            tiny_policy(), config, book=book, generator=gen, on_published=on_published
        )
        ref = system.spawn(lambda: learner, name="learner")
        await ref.tell(ScoredGroup(group_id="g0", trajectories=_group("g0", 4)))
        # No deadline of ours until the update's thread is done (the virtual clock would jump
        # to it while the thread runs); from the first ask on, everything is on the loop.
        await generator.asked.wait()
        with anyio.fail_after(60):
            await done.wait()
        stats = await ref.ask(GetLearnerStatistics(), timeout=60)
    assert published == [1]
    assert generator.asks == 2  # the retry learnt that the late first try had landed
    assert book.version == 1
    assert stats.unpublished == 0


async def test_a_step_past_its_deadline_is_reported_and_kept(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Before, the deadline fired only once the thread had ended, and then discarded the
    # step whose version and consumed set were already applied.
    release = threading.Event()
    published: list[int] = []
    done = anyio.Event()

    def on_published(version: int) -> None:
        published.append(version)
        done.set()

    book = TrainBook(1, 4)
    learner = Learner(
        tiny_policy(),
        LearnerConfig(batch_size=4, k=1, step_timeout_s=5.0),
        book=book,
        on_published=on_published,
    )
    update = learner.core.update

    def held(groups: Sequence[Sequence[Trajectory]]) -> StepStats:
        assert release.wait(timeout=30)
        return update(groups)

    monkeypatch.setattr(learner.core, "update", held)
    with capture_logs() as logs:
        async with ActorSystem(lag_interval=None) as system:
            ref = system.spawn(lambda: learner, name="learner")
            try:
                await ref.tell(ScoredGroup(group_id="g0", trajectories=_group("g0", 4)))
                # Virtual time: the update is held, so the clock jumps past the 5 s deadline.
                await anyio.sleep(6)
                overdue = [e["work"] for e in logs if e["event"] == "learner_overdue"]
                assert overdue == ["step"], "the watchdog must speak while the step still runs"
            finally:
                release.set()
            await done.wait()
            stats = await ref.ask(GetLearnerStatistics(), timeout=60)
    assert published == [1]
    assert (stats.version, stats.samples, stats.overdue) == (1, 4, 1)
    assert book.version == 1
