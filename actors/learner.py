"""`Learner`: consumes scored GRPO groups, steps the optimizer, publishes, checkpoints.

Groups wait in a buffer. The learner steps when it holds samples of at least `batch_size`
episodes (a multi-turn episode yields one sample per model turn; admission counts episodes, so
the two agree) and the staleness book allows it (no running rollout would fall past the
bound); it takes the oldest groups first. Any sample already past the bound is dropped and
counted (a guard that should read zero). After a step the new weights go to the generator (an
ask: the reply means they are being served), then the book's version moves on, which reopens
admission. The step itself runs in a worker thread, watched by a deadline; the loss is in
`actors/_grpo.py`.

Failures keep one invariant: every consumed sample is in exactly one version's record (the
`on_published` callback, called once per applied version). A step whose update raises puts
its batch back and crashes the actor: the supervisor (`keep_state`, `redeliver`) hands the
message back, and the handler, which ignores samples it already holds, retries the batch. A
step that was applied is booked whatever happens to its publication (retried, then given up).
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import anyio
import anyio.to_thread

from actors._learner_core import (
    Checkpoint,
    CorruptCheckpointError,
    LearnerConfig,
    LearnerCore,
    StepStats,
    Trajectory,
    episode_of,
    episodes_in,
    load_checkpoint,
)
from actors.generator import WeightsPublished
from policies.neural import NeuralPolicy
from policies.staleness import StalenessBook, split_stale, take_batch
from runtime import Actor, ActorRef, Message, handler

__all__ = [
    "Checkpoint",
    "CorruptCheckpointError",
    "GetLearnerStatistics",
    "Learner",
    "LearnerConfig",
    "LearnerStatistics",
    "RolloutSettled",
    "ScoredGroup",
    "SetCurriculumState",
    "Trajectory",
    "episode_of",
    "episodes_in",
    "load_checkpoint",
]

T = TypeVar("T")


class ScoredGroup(Message):
    """Samples of one task (a GRPO group); the advantages are relative within it."""

    group_id: str
    trajectories: list[Trajectory]


class RolloutSettled(Message):
    """A rollout ended without a sample (failed, cancelled): a waited-for straggler is gone."""

    rollout_id: str


class SetCurriculumState(Message):
    """The caller's curriculum state, saved opaquely with the next checkpoint."""

    blob: bytes


class GetLearnerStatistics(Message):
    pass


@dataclasses.dataclass(frozen=True)
class LearnerStatistics:
    version: int
    steps: int
    optimizer_steps: int  # `steps` times the minibatches per version
    samples: int
    dropped_stale: int
    duplicates: int
    staleness: dict[int, int]
    max_staleness: int
    busy_s: float
    idle_fraction: float
    last: StepStats | None
    checkpoints: int
    waiting: int = 0  # samples buffered for a later step
    failed_steps: int = 0  # updates that raised (their batch went back to the buffer)
    overdue: int = 0  # thread calls still running at the `step_timeout_s` watchdog
    unpublished: int = 0  # versions the generator never confirmed (publication given up)


class Learner(Actor):
    """Trains `policy`; publishes to `generator` (if any); `book` carries the bound k."""

    def __init__(
        self,
        policy: NeuralPolicy,
        config: LearnerConfig,
        *,
        book: StalenessBook,
        generator: ActorRef | None = None,
        reference: NeuralPolicy | None = None,
        resume: Checkpoint | None = None,
        on_published: Callable[[int], None] | None = None,
        demonstrations: Sequence[tuple[Sequence[int], Sequence[int]]] = (),
    ) -> None:
        if book.k != config.k or book.batch_size != config.batch_size:
            raise ValueError("the staleness book and the learner config disagree on k or batch")
        self.core = LearnerCore(
            policy, config, reference=reference, resume=resume, demonstrations=demonstrations
        )
        self.config = config
        self.book = book
        self.generator = generator
        self.on_published = on_published
        self._buffer: list[list[Trajectory]] = []
        self._staleness: dict[int, int] = {}
        self._dropped = self._duplicates = self._steps = self._samples = self._checkpoints = 0
        self._optimizer_steps = 0
        self._failed_steps = self._overdue = self._unpublished = 0
        self._busy_s = 0.0
        self._first_seen: float | None = None
        self._last: StepStats | None = None
        book.resume_at(self.core.version)
        self._served = book.version  # the version the generator last confirmed serving

    async def on_start(self) -> None:
        m = self.system.metrics
        self._m_stale = m.histogram("learner.staleness")
        self._m_is = m.histogram("learner.is_weight_mean")
        self._m_step = m.histogram("learner.step_s")
        self._m_reward = m.histogram("learner.reward_mean", floor=1e-4)
        self._m_dropped = m.counter("learner.dropped_stale")
        for name in ("loss", "clip_fraction", "kl_behaviour", "kl_reference", "is_weight_max"):
            m.gauge(f"learner.{name}", self._reader(name))
        m.gauge("learner.version", lambda: float(self.core.version))
        m.gauge("learner.imitation_loss", lambda: self._last.imitation_loss if self._last else 0.0)
        m.gauge("learner.imitation_kept", lambda: self._last.imitation_kept if self._last else 0.0)
        m.gauge("learner.demo_loss", lambda: self._last.demo_loss if self._last else 0.0)
        m.gauge("learner.idle_fraction", lambda: self._idle_fraction())

    def _reader(self, name: str) -> Callable[[], float]:
        return lambda: float(getattr(self._last.loss, name)) if self._last else 0.0

    # -- handlers --------------------------------------------------------------------------------

    @handler
    async def scored_group(self, msg: ScoredGroup) -> None:
        if self._first_seen is None:
            self._first_seen = time.perf_counter()
        # A redelivered message (after a crash) brings samples the buffer already holds.
        held = {t.rollout_id for group in self._buffer for t in group}
        fresh = [
            t
            for t in msg.trajectories
            if t.rollout_id not in self.core.consumed and t.rollout_id not in held
        ]
        self._duplicates += len(msg.trajectories) - len(fresh)
        if fresh:
            self._buffer.append(fresh)
        await self._train_while_possible()

    @handler
    async def rollout_settled(self, msg: RolloutSettled) -> None:
        await self._train_while_possible()

    @handler
    def set_curriculum_state(self, msg: SetCurriculumState) -> None:
        self.core.curriculum = bytes(msg.blob)

    @handler
    def get_statistics(self, msg: GetLearnerStatistics) -> LearnerStatistics:
        return LearnerStatistics(
            version=self.core.version,
            steps=self._steps,
            optimizer_steps=self._optimizer_steps,
            samples=self._samples,
            dropped_stale=self._dropped,
            duplicates=self._duplicates,
            staleness=dict(sorted(self._staleness.items())),
            max_staleness=max(self._staleness, default=0),
            busy_s=self._busy_s,
            idle_fraction=self._idle_fraction(),
            last=self._last,
            checkpoints=self._checkpoints,
            waiting=sum(len(group) for group in self._buffer),
            failed_steps=self._failed_steps,
            overdue=self._overdue,
            unpublished=self._unpublished,
        )

    # -- stepping --------------------------------------------------------------------------------

    async def _train_while_possible(self) -> None:
        while True:
            self._drop_stale()
            if sum(episodes_in(g) for g in self._buffer) < self.config.batch_size:
                return
            if not self.book.may_step(self.core.version):
                return  # a straggler would fall past the bound: wait for it
            await self._step(self._take_batch())

    def _drop_stale(self) -> None:
        self._buffer, dropped = split_stale(self._buffer, self.core.version, self.config.k)
        if dropped:
            self._dropped += dropped
            self._m_dropped.inc(dropped)
            self.log.warning("stale_samples_dropped", count=dropped, version=self.core.version)

    def _take_batch(self) -> list[list[Trajectory]]:
        batch, self._buffer = take_batch(
            self._buffer, self.core.version, self.config.k, self.config.batch_size, size=episodes_in
        )
        return batch

    async def _step(self, batch: list[list[Trajectory]]) -> None:
        """Train on `batch`, publish, book the version, maybe checkpoint.

        :raises Exception: what the update raised, with `batch` back at the buffer's front.
        """
        stats: StepStats | None = None
        started = time.perf_counter()
        try:
            try:
                stats = await self._in_thread("step", self.core.update, batch)
            except Exception:
                # No version was made and nothing booked: the batch waits again, oldest first,
                # and the crash goes to the supervisor, whose redelivered message retries it.
                # (`update` is all or nothing: minibatch steps made before the failure are
                # undone, so the retry trains no sample twice.)
                self._buffer[:0] = batch
                self._failed_steps += 1
                raise
            self._account(batch, stats)
            await self._publish(stats.version)
        finally:
            self._busy_s += time.perf_counter() - started
            # Whatever happened, the book hears what the generator serves: at k = 0 it shuts
            # admission from `may_step` until then (roost/train/book.py).
            self.book.version = self._served
            # A version made is booked even if its publication failed: its samples are now
            # consumed, and this is the one call that records them under it.
            if stats is not None and self.on_published is not None:
                self.on_published(stats.version)
        every = self.config.checkpoint_every
        if every and self.config.checkpoint_dir and self.core.version % every == 0:
            await self._checkpoint()

    def _account(self, batch: list[list[Trajectory]], stats: StepStats) -> None:
        trained_at = stats.version - 1
        for group in batch:
            for t in group:
                lag = trained_at - t.oldest_version
                self._staleness[lag] = self._staleness.get(lag, 0) + 1
                self._m_stale.record(float(lag))
        self._steps += 1
        self._optimizer_steps += stats.optimizer_steps
        self._samples += stats.samples
        self._last = stats
        self._m_step.record(stats.seconds)
        self._m_is.record(stats.loss.is_weight_mean)
        self._m_reward.record(max(0.0, stats.reward_mean))

    async def _publish(self, version: int) -> None:
        """Hand `version`'s weights to the generator; `_served` becomes the version it serves.

        A failed or timed-out try is retried, up to `publish_attempts` in all: the generator
        loads only a version newer than its own and replies with what it serves, so a retry
        also learns what a late first try did. After the last, the version stays unpublished
        (counted) and admission keeps counting from the last version confirmed; at k = 0 that
        holds admission shut, as on-policy training must while the old weights are served.
        """
        if self.generator is None:
            self._served = version
            return
        state: dict[str, Any] | None = None
        for attempt in range(1, self.config.publish_attempts + 1):
            try:
                if state is None:
                    state = await self._in_thread("publish", self.core.publishable_state)
                served = await self.generator.ask(
                    WeightsPublished(version=version, state=state),
                    timeout=self.config.publish_timeout_s,
                )
            except Exception as exc:
                self.log.error("publish_failed", version=version, attempt=attempt, exc_info=exc)
                continue
            if served != version:
                self.log.error("publish_not_taken", version=version, served=served)
            self._served = served
            return
        self._unpublished += 1
        self.log.error("publish_given_up", version=version, served=self._served)

    async def _checkpoint(self) -> None:
        directory = self.config.checkpoint_dir
        assert directory is not None
        path = await self._in_thread("checkpoint", self.core.save, directory)
        self._checkpoints += 1
        self.log.info("checkpoint_saved", path=str(path), version=self.core.version)

    async def _in_thread(self, work: str, fn: Callable[..., T], *args: Any) -> T:
        """`fn(*args)` in a worker thread, under the `step_timeout_s` watchdog.

        The deadline reports (logs `learner_overdue`, counts `overdue`); it never cancels. A
        thread cannot be stopped, and abandoning one is never safe here: an update or a save
        still running would share the weights and the optimizer with the next step. So the
        work is awaited to its end and its result kept, even by a cancelled caller (the wait
        is shielded: the caller would wait for the thread anyway, and can then book it).
        """
        outcome: list[T] = []
        failure: Exception | None = None

        async def watchdog() -> None:
            await anyio.sleep(self.config.step_timeout_s)
            self._overdue += 1
            self.log.error("learner_overdue", work=work, deadline_s=self.config.step_timeout_s)

        with anyio.CancelScope(shield=True):
            async with anyio.create_task_group() as group:
                group.start_soon(watchdog)
                try:
                    outcome.append(await anyio.to_thread.run_sync(fn, *args))
                except Exception as exc:  # raised below, not wrapped in the group's
                    failure = exc
                group.cancel_scope.cancel()
        if failure is not None:
            raise failure
        return outcome[0]

    def _idle_fraction(self) -> float:
        if self._first_seen is None:
            return 1.0
        wall = time.perf_counter() - self._first_seen
        return max(0.0, 1.0 - self._busy_s / wall) if wall > 0 else 0.0
