"""`Collector`: the scheduler's sink. Scores episodes, forms GRPO groups, feeds the learner,
and writes every terminal record to the run log.

Each model turn of a scored episode becomes one training sample. With `credit="turn"` (the
default) it carries the reward of its own verdict (`turn_reward`); with `"episode"` the
episode's reward (a revision that passes then credits the wrong attempts before it). A group
is the rollouts of one drawn task; its samples are settled in the staleness book only when the
whole group is in, so the learner waits for a group rather than letting its first member go
stale. Every record is written the moment its rollout ends, a scored one with its reward and
turns, so a process killed before the learner consumed it loses neither; the learner step
that consumes it is a `StepRecord` naming its rollouts, and a group never trained on gets a
`SettledRecord` with the reason (roost/train/lineage.py joins them when the log is read).
"""

from __future__ import annotations

import collections
import dataclasses
import random
import time
from collections.abc import Callable
from typing import Any, Literal

import anyio
import msgspec

from actors.learner import RolloutSettled, ScoredGroup, Trajectory, episode_of
from actors.rollouts import RolloutFinished
from policies.staleness import StalenessBook
from roost.train.episode import EpisodeStore, EpisodeTurn
from roost.train.records import SettledRecord, StepRecord, TrajectoryRecord, TurnRecord
from runtime import Actor, ActorCrashedError, ActorRef, AskTimeoutError, Message, handler
from tasks import Task

__all__ = [
    "Collector",
    "FlushPending",
    "LearnerStepped",
    "RunCounts",
    "SyncCollector",
    "episode_reward",
    "relabelled_sample",
    "solved_samples",
    "turn_reward",
]

NO_SIGNAL = "not trained: every rollout of its group had the same reward"
LEARNER_GAVE_UP = "not trained: the learner crashed on its group every time it was redelivered"
FIRST_ATTEMPT_PASS = 1.0  # the reward of a pass at the first turn
RATE_WINDOW = 256  # recent episodes behind the live pass rate and reward
LEARNER_ASK_S = 1800.0  # a step (under its own deadline) and a publish


def turn_reward(turn: EpisodeTurn, index: int, partial: float = 0.5) -> float:
    """The reward of turn `index` (from 0) by its own verdict: 1 for a pass (less 0.1 per
    turn before it), else `partial` times the share of tests passed."""
    if turn.verdict.passed:
        return FIRST_ATTEMPT_PASS - 0.1 * index
    return partial * turn.verdict.score


def episode_reward(turns: list[EpisodeTurn], partial: float = 0.5) -> float:
    """The reward of the episode's last turn (0 for an episode without turns)."""
    return turn_reward(turns[-1], len(turns) - 1, partial) if turns else 0.0


def relabelled_sample(rollout_id: str, turns: list[EpisodeTurn]) -> Trajectory | None:
    """A revision that passed, as the answer to the first attempt's prompt (`rollout#h`), or
    None when the episode did not end in a revised pass.

    The tests were run on that program, so it is a verified solution of the task as first
    asked: it trains the first attempt toward it with the reward of a first-attempt pass.
    """
    if len(turns) < 2 or not turns[-1].verdict.passed or not turns[-1].sample.tokens:
        return None
    last = turns[-1].sample
    return Trajectory(
        rollout_id=f"{rollout_id}#h",
        prompt=turns[0].prompt,
        completion=last.tokens,
        logprobs=last.logprobs,  # of the revision's prompt: not used (relabelled)
        versions=last.versions,
        reward=turn_reward(turns[-1], 0),
        relabelled=True,
    )


def solved_samples(rollout_id: str, turns: list[EpisodeTurn]) -> list[Trajectory]:
    """Each failed turn whose program passed another training task's tests (a hindsight
    task), as that task's first-attempt pass (`rollout#gI`, I the turn).

    The tests of that task were run on that program, so it is a verified answer to that
    task's prompt, with the reward of a first-attempt pass; the completion was sampled for
    another prompt, so it trains with importance weight 1 (`relabelled`).
    """
    return [
        Trajectory(
            rollout_id=f"{rollout_id}#g{i}",
            prompt=t.solved.prompt,
            completion=t.sample.tokens,
            logprobs=t.sample.logprobs,  # of its own prompt: not used (relabelled)
            versions=t.sample.versions,
            reward=FIRST_ATTEMPT_PASS,
            relabelled=True,
            goal=t.solved.task.id,
        )
        for i, t in enumerate(turns)
        if t.solved is not None and t.sample.tokens
    ]


class LearnerStepped(Message):
    """The learner published `version`; its step consumed `sample_ids` (taken from the
    learner's consumed set in the publish callback, before any later step)."""

    version: int
    sample_ids: list[str]


class SyncCollector(Message):
    """A no-op ask: its reply means every message sent before it was handled."""


class FlushPending(Message):
    """The run is ending: replies how many scored rollouts no step consumed (their records are
    in the log already, never trained on) and forgets them."""


@dataclasses.dataclass
class RunCounts:
    """The run's books, shared with the feeder and the live view (one event loop)."""

    requested: int = 0
    scored: int = 0
    failed: int = 0
    cancelled: int = 0
    passed: int = 0
    no_signal: int = 0  # scored, but in a group of equal rewards: not trained on
    solved: int = 0  # failed turns that passed a hindsight task's tests (extra samples)
    failures: dict[str, int] = dataclasses.field(default_factory=dict)
    recent_pass: collections.deque[float] = dataclasses.field(
        default_factory=lambda: collections.deque(maxlen=RATE_WINDOW)
    )
    recent_reward: collections.deque[float] = dataclasses.field(
        default_factory=lambda: collections.deque(maxlen=RATE_WINDOW)
    )
    progress: anyio.Event = dataclasses.field(default_factory=anyio.Event)

    @property
    def settled(self) -> int:
        return self.scored + self.failed + self.cancelled

    def wake(self) -> None:
        self.progress.set()
        self.progress = anyio.Event()


@dataclasses.dataclass
class _Group:
    """The samples of a GRPO group so far, from `seen` of its rollouts."""

    seen: int = 0
    samples: list[Trajectory] = dataclasses.field(default_factory=list)
    passed: set[str] = dataclasses.field(default_factory=set)  # the samples that passed

    def without_partial_credit(self) -> list[Trajectory]:
        """The samples, each failure scored 0 instead of its share of tests passed (a
        hindsight task's sample is a pass of that task)."""
        return [
            s if s.rollout_id in self.passed or s.goal else msgspec.structs.replace(s, reward=0.0)
            for s in self.samples
        ]


def _passed_samples(
    rollout_id: str,
    turns: list[EpisodeTurn],
    credit: Literal["turn", "episode"],
    relabelled: Trajectory | None,
) -> set[str]:
    """The ids of an episode's samples that carry a pass's reward: each passing turn with
    per-turn credit, every turn of a passing episode with episode credit, and the relabelled
    revision."""
    won = turns[-1].verdict.passed if turns else False
    ids = {
        f"{rollout_id}#{i}"
        for i, t in enumerate(turns)
        if (t.verdict.passed if credit == "turn" else won)
    }
    return ids | ({relabelled.rollout_id} if relabelled is not None else set())


@dataclasses.dataclass(frozen=True)
class _Pending:
    """A scored rollout not yet consumed: what its step's record averages."""

    reward: float
    passed: bool


class Collector(Actor):
    def __init__(
        self,
        *,
        store: EpisodeStore,
        book: StalenessBook,
        learner: ActorRef,
        recorder: ActorRef,
        task_of: Callable[[str], Task],
        is_demo_level: Callable[[int], bool],
        group_size: int,
        counts: RunCounts,
        rl_clock: Callable[[], float],
        open_rollouts: dict[str, Any],
        skip_no_signal: bool = True,
        on_scored: Callable[[str, int, bool, bool], None] | None = None,
        credit: Literal["turn", "episode"] = "turn",
        partial_credit: float = 0.5,
        partial_credit_in: Literal["all", "unsolved"] = "all",
        hindsight: bool = False,
        train_revisions: float = 1.0,
        seed: int = 0,
    ) -> None:
        self.store = store
        self.book = book
        self.learner = learner
        self.recorder = recorder
        self.task_of = task_of
        self.is_demo_level = is_demo_level
        self.group_size = group_size
        self.counts = counts
        self.rl_clock = rl_clock
        self._groups: dict[str, _Group] = {}
        self._pending: dict[str, _Pending] = {}
        self.open = open_rollouts
        self.skip_no_signal = skip_no_signal
        # (task id, level, passed, first attempt passed): the curriculum's feed
        self.on_scored = on_scored
        self.credit = credit
        self.partial_credit = partial_credit
        self.partial_credit_in = partial_credit_in
        self.hindsight = hindsight
        self.train_revisions = train_revisions
        self._rng = random.Random(seed)

    def _keeps_revision(self) -> bool:
        """Whether a revision turn trains (`train_revisions`, drawn per turn). An episode's
        first sample always trains, so every scored episode reaches the learner."""
        return self.train_revisions >= 1.0 or self._rng.random() < self.train_revisions

    async def on_start(self) -> None:
        metrics = self.system.metrics
        self._m_reward = metrics.histogram("train.reward", floor=1e-3)
        self._m_turns = metrics.histogram("train.turns", floor=1.0)
        metrics.gauge("train.pass_rate", self._rate(self.counts.recent_pass))
        metrics.gauge("train.reward_mean", self._rate(self.counts.recent_reward))
        metrics.gauge("train.scored", lambda: float(self.counts.scored))
        metrics.gauge("train.failed", lambda: float(self.counts.failed))
        metrics.gauge("train.cancelled", lambda: float(self.counts.cancelled))
        metrics.gauge("train.hindsight_samples", lambda: float(self.counts.solved))

    @staticmethod
    def _rate(window: collections.deque[float]) -> Callable[[], float]:
        return lambda: sum(window) / len(window) if window else 0.0

    @handler
    async def finished(self, msg: RolloutFinished) -> None:
        started = time.perf_counter()
        turns = self.store.pop(msg.rollout_id)
        if self.open.pop(msg.rollout_id, None) is None:
            self.log.warning("late_terminal_record_ignored", rollout=msg.rollout_id)
            return
        task = self.task_of(msg.task_id)
        usable = msg.status == "completed" and bool(turns)
        reward = episode_reward(turns, self.partial_credit) if usable else 0.0
        record = TrajectoryRecord(
            rollout_id=msg.rollout_id,
            task_id=msg.task_id,
            level=task.level,
            demo_level=self.is_demo_level(task.level),
            status="scored" if usable else ("cancelled" if msg.status == "cancelled" else "failed"),
            reason=msg.reason if msg.status != "completed" else ("" if usable else "no turns"),
            reward=reward,
            passed=usable and turns[-1].verdict.passed,
            attempts=msg.attempts,
            turns=[_turn_record(t) for t in turns],
            requested_at=msg.requested_at,
            finished_at=msg.finished_at,
            queue_wait_s=msg.queue_wait_s,
            acquire_s=msg.acquire_s,
            generate_s=sum(t.generate_s for t in turns),
            exec_s=sum(t.exec_s for t in turns),
            wall=time.time(),
        )
        group_id, _, _ = msg.rollout_id.rpartition("/")
        group = self._groups.setdefault(group_id, _Group())
        if usable:
            own = [
                Trajectory(
                    rollout_id=f"{msg.rollout_id}#{i}",
                    prompt=t.prompt,
                    completion=t.sample.tokens,
                    logprobs=t.sample.logprobs,
                    versions=t.sample.versions,
                    reward=(
                        turn_reward(t, i, self.partial_credit) if self.credit == "turn" else reward
                    ),
                )
                for i, t in enumerate(turns)
                if t.sample.tokens
            ]
            group.samples += [s for i, s in enumerate(own) if i == 0 or self._keeps_revision()]
            extra = relabelled_sample(msg.rollout_id, turns) if self.hindsight else None
            if extra is not None:
                group.samples.append(extra)
            solved = solved_samples(msg.rollout_id, turns)
            group.samples += solved
            self.counts.solved += len(solved)
            if self.partial_credit_in == "unsolved":  # the only reader of `passed`
                group.passed |= _passed_samples(msg.rollout_id, turns, self.credit, extra)
        self._count(record)
        if usable and self.on_scored is not None:
            first_passed = bool(record.turns) and record.turns[0].passed
            self.on_scored(task.id, task.level, record.passed, first_passed)
        scored_at = anyio.current_time() if usable else None
        record = _with(record, evaluate_s=time.perf_counter() - started, scored_at=scored_at)
        await self.recorder.tell(record)  # written now: a kill before its step loses nothing
        if usable:
            self._pending[msg.rollout_id] = _Pending(record.reward, record.passed)
        else:
            self.book.settled(msg.rollout_id, usable=False)
            await self.learner.tell(RolloutSettled(rollout_id=msg.rollout_id))
        group.seen += 1
        if group.seen < self.group_size:
            return
        self._groups.pop(group_id, None)
        samples = group.samples
        if group.passed and self.partial_credit_in == "unsolved":
            samples = group.without_partial_credit()
        rollouts = sorted({episode_of(s.rollout_id) for s in samples})
        if self.skip_no_signal and len({s.reward for s in samples}) <= 1:
            # Equal rewards: every advantage is zero, so the step would cost a full forward
            # and backward pass and change nothing. Recorded, never trained on; the slots go
            # back to admission.
            self.counts.no_signal += len(rollouts)
            await self._settle_untrained(rollouts, NO_SIGNAL)
            return
        if not samples:
            return
        # Settled only once the learner holds the group (the ask's reply): a group waiting in
        # the learner's mailbox behind a long step is invisible to it, and would go stale if
        # the book no longer counted it as running. The nudge lets the learner step now that
        # the group no longer holds it back (with k = 0 nothing else would wake it).
        try:
            await self.learner.ask(
                ScoredGroup(group_id=group_id, trajectories=samples), timeout=LEARNER_ASK_S
            )
        except AskTimeoutError:
            self.log.error("learner_did_not_take_group", group=group_id)
        except ActorCrashedError:
            # The group crashed the learner more often than it is redelivered, so the learner
            # gave up on it (a dead letter). Its rollouts are recorded and never trained on; a
            # crash here instead would redeliver this message to a collector that has already
            # let the group go.
            self.log.error("learner_gave_up_on_group", group=group_id)
            await self._settle_untrained(rollouts, LEARNER_GAVE_UP)
            return
        for rollout_id in rollouts:
            self.book.settled(rollout_id, usable=True)
        await self.learner.tell(RolloutSettled(rollout_id=rollouts[0]))

    async def _settle_untrained(self, rollouts: list[str], reason: str) -> None:
        """Record these rollouts as never trained on, and give their slots back to admission."""
        for rollout_id in rollouts:
            self._pending.pop(rollout_id, None)
        settled = SettledRecord(rollout_ids=rollouts, reason=reason, wall=time.time())
        await self.recorder.tell(settled)
        for rollout_id in rollouts:
            self.book.settled(rollout_id, usable=False)
            await self.learner.tell(RolloutSettled(rollout_id=rollout_id))

    @handler
    async def learner_stepped(self, msg: LearnerStepped) -> None:
        consumed = msg.sample_ids
        rollouts = {episode_of(sample_id) for sample_id in consumed}
        now = anyio.current_time()
        rewards: list[float] = []
        passes = 0
        for rollout_id in sorted(rollouts):
            pending = self._pending.pop(rollout_id, None)
            if pending is None:
                continue
            rewards.append(pending.reward)
            passes += pending.passed
        # The consumed rollouts' records are in the log already: this record names them, and
        # its `at` minus each one's `scored_at` is that rollout's learner wait.
        await self.recorder.tell(
            StepRecord(
                version=msg.version,
                samples=len(consumed),
                reward_mean=sum(rewards) / len(rewards) if rewards else 0.0,
                pass_rate=passes / len(rewards) if rewards else 0.0,
                wall=time.time(),
                elapsed_s=self.rl_clock(),
                at=now,
                rollout_ids=sorted(rollouts),
            )
        )

    @handler
    def sync(self, msg: SyncCollector) -> None:
        return None

    @handler
    def flush_pending(self, msg: FlushPending) -> int:
        pending, self._pending = self._pending, {}
        return len(pending)

    def _count(self, record: TrajectoryRecord) -> None:
        counts = self.counts
        if record.status == "scored":
            counts.scored += 1
            counts.passed += record.passed
            counts.recent_pass.append(float(record.passed))
            counts.recent_reward.append(record.reward)
            self._m_reward.record(max(record.reward, 0.0))
            self._m_turns.record(float(len(record.turns)))
        else:
            if record.status == "failed":
                counts.failed += 1
            else:
                counts.cancelled += 1
            kind = (record.reason.split(":")[0] or record.status).strip()
            counts.failures[kind] = counts.failures.get(kind, 0) + 1
        counts.wake()


def _turn_record(turn: EpisodeTurn) -> TurnRecord:
    versions = turn.sample.versions or [0]
    return TurnRecord(
        text=turn.text,
        passed=turn.verdict.passed,
        score=turn.verdict.score,
        reason=turn.verdict.reason[:200],
        tokens=len(turn.sample.tokens),
        min_version=min(versions),
        max_version=max(versions),
        generate_s=turn.generate_s,
        exec_s=turn.exec_s,
        reused=turn.verdict.reused,
        solved=turn.solved.task.id if turn.solved is not None else "",
    )


def _with(record: TrajectoryRecord, **changes: object) -> TrajectoryRecord:
    return msgspec.structs.replace(record, **changes)
