"""`Learner`: consumes scored GRPO groups, steps the optimizer, publishes, checkpoints.

Groups wait in a buffer. The learner steps when it holds samples of at least `batch_size`
episodes (a multi-turn episode yields one sample per model turn; admission counts episodes, so
the two agree) and the staleness book allows it (no running rollout would fall past the
bound); it takes the oldest groups first. Any sample already past the bound is dropped and
counted (a guard that should read zero). After a step the new weights go to the generator (an
ask: the reply means they are being served), then the book's version moves on, which reopens
admission. The step itself runs in a worker thread, under a deadline; the loss is in
`actors/_grpo.py`.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Sequence

import anyio
import anyio.to_thread

from actors._learner_core import (
    Checkpoint,
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
        self._busy_s = 0.0
        self._first_seen: float | None = None
        self._last: StepStats | None = None
        book.resume_at(self.core.version)

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
        fresh = [t for t in msg.trajectories if t.rollout_id not in self.core.consumed]
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
        u = self.core.version
        for group in batch:
            for t in group:
                lag = u - t.oldest_version
                self._staleness[lag] = self._staleness.get(lag, 0) + 1
                self._m_stale.record(float(lag))
        started = time.perf_counter()
        with anyio.fail_after(self.config.step_timeout_s):
            stats = await anyio.to_thread.run_sync(self.core.update, batch)
            state = await anyio.to_thread.run_sync(self.core.publishable_state)
        self._busy_s += time.perf_counter() - started
        self._steps += 1
        self._optimizer_steps += stats.optimizer_steps
        self._samples += stats.samples
        self._last = stats
        self._m_step.record(stats.seconds)
        self._m_is.record(stats.loss.is_weight_mean)
        self._m_reward.record(max(0.0, stats.reward_mean))
        served = stats.version
        if self.generator is not None:
            served = await self.generator.ask(
                WeightsPublished(version=stats.version, state=state),
                timeout=self.config.publish_timeout_s,
            )
            if served != stats.version:
                self.log.error("publish_not_taken", version=stats.version, served=served)
        # Admission counts from what the generator serves, so a refused switch only slows it.
        self.book.version = served
        if self.on_published is not None:
            self.on_published(stats.version)
        every = self.config.checkpoint_every
        if every and self.config.checkpoint_dir and stats.version % every == 0:
            await self._checkpoint()

    async def _checkpoint(self) -> None:
        directory = self.config.checkpoint_dir
        assert directory is not None
        with anyio.fail_after(self.config.step_timeout_s):
            path = await anyio.to_thread.run_sync(self.core.save, directory)
        self._checkpoints += 1
        self.log.info("checkpoint_saved", path=str(path), version=self.core.version)

    def _idle_fraction(self) -> float:
        if self._first_seen is None:
            return 1.0
        wall = time.perf_counter() - self._first_seen
        return max(0.0, 1.0 - self._busy_s / wall) if wall > 0 else 0.0
