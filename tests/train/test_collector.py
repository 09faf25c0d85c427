"""The collector when the learner gives up on a group: recorded as never trained on, not lost."""

from __future__ import annotations

import anyio
import pytest

from actors.learner import RolloutSettled, ScoredGroup
from actors.rollouts import RolloutFinished
from policies.neural import Sample
from policies.staleness import StalenessBook
from roost.train.collector import LEARNER_GAVE_UP, Collector, RunCounts
from roost.train.episode import EpisodeStore, EpisodeTurn
from roost.train.records import TrajectoryRecord
from runtime import Actor, ActorSystem, handler
from tasks import Task, TestCase, Verdict

pytestmark = pytest.mark.anyio


class _CrashingLearner(Actor):
    """Crashes on every group it is handed; takes the settle notes."""

    def __init__(self, settled: list[str], done: anyio.Event, want: int) -> None:
        self.settled, self.done, self.want = settled, done, want

    @handler
    def group(self, msg: ScoredGroup) -> None:
        raise RuntimeError(f"cannot train on {msg.group_id}")

    @handler
    def settle(self, msg: RolloutSettled) -> None:
        self.settled.append(msg.rollout_id)
        if len(self.settled) == self.want:
            self.done.set()


class _Recorder(Actor):
    def __init__(self, records: list[TrajectoryRecord], done: anyio.Event, want: int) -> None:
        self.records, self.done, self.want = records, done, want

    @handler
    def record(self, msg: TrajectoryRecord) -> None:
        self.records.append(msg)
        if len(self.records) == self.want:
            self.done.set()


def _turn(passed: bool) -> EpisodeTurn:
    verdict = Verdict(passed=passed, score=float(passed), failure=None if passed else "agent")
    return EpisodeTurn([1], Sample([2], [0.0], [0]), "x", verdict, 0.1, 0.1)


async def test_a_group_the_learner_gave_up_on_is_recorded_untrained_and_settled() -> None:
    task = Task(id="t1", prompt="p", entry_point="f", tests=[TestCase(call="f()", expected="1")])
    store, book, counts = EpisodeStore(), StalenessBook(k=1, batch_size=4), RunCounts()
    records: list[TrajectoryRecord] = []
    settled: list[str] = []
    recorded, all_settled = anyio.Event(), anyio.Event()
    ids = ["g1/0", "g1/1"]
    async with ActorSystem() as system:
        # Redelivered once, the group crashes the learner again and is given up on: the
        # collector's ask fails with ActorCrashedError.
        learner = system.spawn(
            lambda: _CrashingLearner(settled, all_settled, len(ids)),
            name="learner",
            keep_state=True,
            redeliver=1,
        )
        recorder = system.spawn(lambda: _Recorder(records, recorded, len(ids)), name="recorder")
        collector = system.spawn(
            lambda: Collector(
                store=store,
                book=book,
                learner=learner,
                recorder=recorder,
                task_of=lambda _: task,
                is_demo_level=lambda _: True,
                group_size=len(ids),
                counts=counts,
                rl_clock=lambda: 0.0,
                open_rollouts=dict.fromkeys(ids, "running"),
            ),
            name="collector",
            keep_state=True,
            redeliver=5,
        )
        for rollout_id, passed in zip(ids, (True, False), strict=True):
            book.began(rollout_id)
            book.ended(rollout_id)
            store.put(rollout_id, [_turn(passed)])
            await collector.tell(
                RolloutFinished(
                    rollout_id=rollout_id,
                    task_id=task.id,
                    group="default",
                    runtime="python",
                    tenant="t",
                    status="completed",
                    passed=passed,
                )
            )
        with anyio.fail_after(10):
            await recorded.wait()
            await all_settled.wait()
        stats = system.statistics()

    assert sorted(r.rollout_id for r in records) == ids
    assert all(r.status == "scored" and r.reason == LEARNER_GAVE_UP for r in records)
    assert sorted(settled) == ids  # their slots went back to admission
    assert book.usable == 0  # and they never count as trained samples
    assert counts.scored == len(ids)
    assert stats.restarts == 2  # the learner's two crashes; the collector never crashed
    assert system.dead_letters.by_reason() == {"crashed": 1}
