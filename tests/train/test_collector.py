"""The collector: the rewards a group trains with, and a group the learner gives up on
(recorded as never trained on, not lost)."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Literal

import anyio
import pytest

from actors.learner import RolloutSettled, ScoredGroup
from actors.rollouts import RolloutFinished
from policies.neural import Sample
from policies.staleness import StalenessBook
from roost.train.collector import LEARNER_GAVE_UP, Collector, RunCounts
from roost.train.episode import EpisodeStore, EpisodeTurn, Solved
from roost.train.lineage import trace_lineage
from roost.train.records import SettledRecord, TrajectoryRecord
from runtime import Actor, ActorRef, ActorSystem, Message, handler
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
    def __init__(self, records: list[Message], done: anyio.Event, want: int) -> None:
        self.records, self.done, self.want = records, done, want

    @handler(Message)
    def record(self, msg: Message) -> None:
        self.records.append(msg)
        if len(self.records) == self.want:
            self.done.set()


class _TakingLearner(Actor):
    """Takes every group it is handed (the collector's ask) and keeps its rewards (and, in
    `ids`, its sample ids)."""

    def __init__(
        self,
        groups: dict[str, list[float]],
        done: anyio.Event,
        want: int,
        ids: dict[str, list[str]] | None = None,
    ) -> None:
        self.groups, self.done, self.want = groups, done, want
        self.ids = {} if ids is None else ids

    @handler
    def group(self, msg: ScoredGroup) -> None:
        ordered = sorted(msg.trajectories, key=lambda t: t.rollout_id)
        self.groups[msg.group_id] = [t.reward for t in ordered]
        self.ids[msg.group_id] = [t.rollout_id for t in ordered]
        if len(self.groups) == self.want:
            self.done.set()

    @handler
    def settle(self, msg: RolloutSettled) -> None:
        pass


def _turn(passed: bool, score: float | None = None) -> EpisodeTurn:
    score = float(passed) if score is None else score
    verdict = Verdict(passed=passed, score=score, failure=None if passed else "agent")
    return EpisodeTurn([1], Sample([2], [0.0], [0]), "x", verdict, 0.1, 0.1)


def _collector(
    store: EpisodeStore,
    book: StalenessBook,
    refs: tuple[ActorRef, ActorRef],
    task: Task,
    ids: Iterable[str],
    *,
    group_size: int,
    counts: RunCounts | None = None,
    partial_credit_in: Literal["all", "unsolved"] = "all",
    train_revisions: float = 1.0,
) -> Callable[[], Collector]:
    """A collector for rollouts `ids` of one task, feeding `refs` = (learner, recorder)."""
    learner, recorder = refs
    return lambda: Collector(
        store=store,
        book=book,
        learner=learner,
        recorder=recorder,
        task_of=lambda _: task,
        is_demo_level=lambda _: True,
        group_size=group_size,
        counts=RunCounts() if counts is None else counts,
        rl_clock=lambda: 0.0,
        open_rollouts=dict.fromkeys(ids, "running"),
        partial_credit_in=partial_credit_in,
        train_revisions=train_revisions,
    )


def _finished(rollout_id: str, task: Task, passed: bool) -> RolloutFinished:
    return RolloutFinished(
        rollout_id=rollout_id,
        task_id=task.id,
        group="default",
        runtime="python",
        tenant="t",
        status="completed",
        passed=passed,
    )


async def _trained_rewards(
    task: Task,
    episodes: dict[str, EpisodeTurn] | dict[str, list[EpisodeTurn]],
    *,
    group_size: int,
    partial_credit_in: Literal["all", "unsolved"] = "all",
    counts: RunCounts | None = None,
    train_revisions: float = 1.0,
    ids: dict[str, list[str]] | None = None,
) -> dict[str, list[float]]:
    """The rewards each group of `episodes` (one turn or a list of turns each) reaches the
    learner with, by sample id; the sample ids too, in `ids` if given."""
    store, book = EpisodeStore(), StalenessBook(k=1, batch_size=8)
    groups: dict[str, list[float]] = {}
    taken = anyio.Event()
    want = len(episodes) // group_size
    async with ActorSystem() as system:
        learner = system.spawn(lambda: _TakingLearner(groups, taken, want, ids), name="learner")
        recorder = system.spawn(lambda: _Recorder([], anyio.Event(), -1), name="recorder")
        collector = system.spawn(
            _collector(
                store,
                book,
                (learner, recorder),
                task,
                episodes,
                group_size=group_size,
                counts=counts,
                partial_credit_in=partial_credit_in,
                train_revisions=train_revisions,
            ),
            name="collector",
        )
        for rollout_id, turn in episodes.items():
            turns = turn if isinstance(turn, list) else [turn]
            book.began(rollout_id)
            book.ended(rollout_id)
            store.put(rollout_id, turns)
            await collector.tell(_finished(rollout_id, task, turns[-1].verdict.passed))
        with anyio.fail_after(10):
            await taken.wait()
    return groups


@pytest.mark.parametrize(
    ("where", "solved_rewards"),
    [("all", [1.0, 0.25, 0.125]), ("unsolved", [1.0, 0.0, 0.0])],
)
async def test_partial_credit_counts_where_configured(
    where: Literal["all", "unsolved"], solved_rewards: list[float]
) -> None:
    """A failure earns half its share of tests passed; with `unsolved`, only in a group where
    nothing passed (a group with a pass trains pass against fail)."""
    task = Task(id="t1", prompt="p", entry_point="f", tests=[TestCase(call="f()", expected="1")])
    episodes = {  # group "solved" has a pass, group "unsolved" none
        "solved/0": _turn(True),
        "solved/1": _turn(False, 0.5),
        "solved/2": _turn(False, 0.25),
        "unsolved/0": _turn(False, 0.5),
        "unsolved/1": _turn(False, 0.25),
        "unsolved/2": _turn(False, 0.0),
    }
    groups = await _trained_rewards(task, episodes, group_size=3, partial_credit_in=where)

    assert groups["solved"] == solved_rewards
    assert groups["unsolved"] == [0.25, 0.125, 0.0]  # no pass: the shares still tell apart


@pytest.mark.parametrize("share", [0.0, 0.5, 1.0])
async def test_train_revisions_keeps_every_first_attempt_and_that_share_of_revisions(
    share: float,
) -> None:
    """`train_revisions` thins out revision turns only: every episode's first attempt trains,
    so no scored episode is left without a sample to settle it."""
    task = Task(id="t1", prompt="p", entry_point="f", tests=[TestCase(call="f()", expected="1")])
    three = [_turn(False, 0.0), _turn(False, 0.5), _turn(True)]
    two = [_turn(False, 0.5), _turn(True)]  # first attempts differ, so every group trains
    episodes = {f"g{g}/{e}": three if e % 2 else two for g in range(10) for e in range(4)}
    revisions_run = sum(len(turns) - 1 for turns in episodes.values())
    ids: dict[str, list[str]] = {}
    await _trained_rewards(task, episodes, group_size=4, train_revisions=share, ids=ids)

    trained = [i for group in ids.values() for i in group]
    first = {i.partition("#")[0] for i in trained if i.endswith("#0")}
    revisions = [i for i in trained if not i.endswith("#0")]
    assert first == set(episodes)  # every episode's first attempt, in every group
    if share == 0.0:
        assert revisions == []
    elif share == 1.0:
        assert len(revisions) == revisions_run
    else:  # 60 revisions, each kept with probability 1/2
        assert 15 < len(revisions) < 45


async def test_a_group_the_learner_gave_up_on_is_recorded_untrained_and_settled() -> None:
    task = Task(id="t1", prompt="p", entry_point="f", tests=[TestCase(call="f()", expected="1")])
    store, book, counts = EpisodeStore(), StalenessBook(k=1, batch_size=4), RunCounts()
    records: list[Message] = []
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
        # Each rollout's record when scored, then one for the group never to be trained on.
        want = len(ids) + 1
        recorder = system.spawn(lambda: _Recorder(records, recorded, want), name="recorder")
        collector = system.spawn(
            _collector(
                store, book, (learner, recorder), task, ids, group_size=len(ids), counts=counts
            ),
            name="collector",
            keep_state=True,
            redeliver=5,
        )
        for rollout_id, passed in zip(ids, (True, False), strict=True):
            book.began(rollout_id)
            book.ended(rollout_id)
            store.put(rollout_id, [_turn(passed)])
            await collector.tell(_finished(rollout_id, task, passed))
        with anyio.fail_after(10):
            await recorded.wait()
            await all_settled.wait()
        stats = system.statistics()

    written = [r for r in records if isinstance(r, TrajectoryRecord)]
    assert sorted(r.rollout_id for r in written) == ids
    assert [(sorted(r.rollout_ids), r.reason) for r in records if isinstance(r, SettledRecord)] == [
        (ids, LEARNER_GAVE_UP)
    ]
    joined = trace_lineage(records).trajectories
    assert all(r.status == "scored" and r.reason == LEARNER_GAVE_UP for r in joined)
    assert all(r.consumed_version is None for r in joined)
    assert sorted(settled) == ids  # their slots went back to admission
    assert book.usable == 0  # and they never count as trained samples
    assert counts.scored == len(ids)
    assert stats.restarts == 2  # the learner's two crashes; the collector never crashed
    assert system.dead_letters.by_reason() == {"crashed": 1}


async def test_a_hindsight_sample_joins_its_group_as_a_pass_of_its_own_task() -> None:
    """A failed turn that passed another task's tests adds that task's first-attempt pass
    (reward 1) to its group; the group's own task is still unsolved, so partial credit stays."""
    task = Task(id="t1", prompt="p", entry_point="f", tests=[TestCase(call="f()", expected="1")])
    other = Task(id="t2", prompt="q", entry_point="f", tests=[TestCase(call="f()", expected="2")])
    wrong = Verdict(passed=False, score=0.5, failure="agent")
    solved = EpisodeTurn([1], Sample([2], [0.0], [0]), "x", wrong, 0.1, 0.1, Solved(other, [1, 5]))
    counts = RunCounts()
    groups = await _trained_rewards(
        task,
        {"g/0": solved, "g/1": _turn(False, 0.0)},
        group_size=2,
        partial_credit_in="unsolved",
        counts=counts,
    )

    assert groups["g"] == [0.25, 1.0, 0.0]  # g/0#0, g/0#g0 (the other task's pass), g/1#0
    assert counts.solved == 1
