"""The RL phase: one supervision tree of scheduler, episode workers, generator, collector,
learner and recorder, fed with GRPO groups of training tasks until the time budget, the
version limit or a stop; then a drain that leaves every requested rollout with exactly one
terminal record and the learner checkpointed.
"""

from __future__ import annotations

import dataclasses
import json
import random
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread
import structlog
import torch

from actors._grpo import LossConfig
from actors.generator import Generator, GeneratorClient, GeneratorConfig
from actors.learner import Checkpoint, GetLearnerStatistics, Learner, LearnerConfig
from actors.recorder import Flush
from actors.rollouts import RolloutRequest
from actors.scheduler import (
    CancelQueued,
    GetStatistics,
    SandboxFreed,
    Scheduler,
    SchedulerConfig,
)
from policies.neural import DEFAULT_THREADS
from policies.scheduling import make_policy as make_scheduling_policy
from policies.transformer import TransformerPolicy
from roost.chaos.docker_daemon import DockerRestartError, restart_docker_daemon
from roost.chaos.spec import ChaosSpec
from roost.chaos.training import ChaosGeneratorClient, ChaosVerifier
from roost.chaos.wrappers import ChaosCounts
from roost.train.book import TrainBook
from roost.train.collector import (
    Collector,
    FlushPending,
    LearnerStepped,
    RunCounts,
    SyncCollector,
)
from roost.train.config import TrainConfig
from roost.train.episode import EpisodeStore, EpisodeWorker
from roost.train.isolation import SandboxRouting
from roost.train.levels import LevelChooser
from roost.train.records import RequestRecord, TrajectoryRecord
from roost.train.task_source import TaskSource
from runtime import ActorRef, ActorSystem, Supervisor
from sandboxes.pool import SandboxPool
from tasks import ReusingVerifier, Task, TestsVerifier, Verifier

__all__ = ["RLOutcome", "RLPhase"]

_log = structlog.get_logger("roost.train.rl")
ASK_TIMEOUT_S = 600.0
MAX_FORM_DRAWS = 64  # a form is kept with chance >= ~1/7 at G = 8: 64 misses is ~1e-4
#: Every actor of the phase survives a crash: restarted with its state (the run's books, the
#: optimizer, the open log), and handed the message it was handling again (its handlers are
#: idempotent), so a crash loses nothing. A message that crashes an actor this many times in
#: a row is a bug, not bad luck: it goes to the dead letters.
SURVIVE_CRASHES: dict[str, Any] = {"keep_state": True, "redeliver": 5}
#: Actors resume after a crash; only a crash loop, not a crash rate that a run can live with,
#: escalates and ends the run (the root's and the RL phase's supervisor's intensity, per minute).
RESTARTS_PER_MINUTE = 10_000


def rl_threads(configured: int) -> int:
    """Intra-op threads of the generator's or the learner's model compute during RL: as
    configured; else, on a CPU, half of torch's default each (the two compute at once: measured
    in docs/benchmarks.md); on a GPU, torch's default (0)."""
    if configured or torch.cuda.is_available():
        return configured
    return max(1, DEFAULT_THREADS // 2)


@dataclasses.dataclass
class RLOutcome:
    version: int
    elapsed_s: float  # RL wall seconds, across resumes
    requested: int  # in this segment
    interrupted: bool
    learner: dict[str, Any]
    generator_tokens: int = 0


class RLPhase:
    """Wires and runs the RL phase inside an entered `ActorSystem` and `SandboxPool`."""

    def __init__(
        self,
        config: TrainConfig,
        *,
        system: ActorSystem,
        pool: SandboxPool,
        source: TaskSource,
        gen_policy: TransformerPolicy,
        learn_policy: TransformerPolicy,
        reference: TransformerPolicy | None,
        resume: Checkpoint | None,
        recorder: ActorRef,
        checkpoint_dir: Path,
        segment: int,
        budget_s: float,
        elapsed_before_s: float,
        counts: RunCounts,
        stop: anyio.Event,
        on_version: Callable[[int], None] | None = None,
        chaos: ChaosSpec | None = None,
        chaos_counts: ChaosCounts | None = None,
        demonstrations: Sequence[tuple[list[int], list[int]]] = (),
    ) -> None:
        self.config = config
        self.demonstrations = demonstrations  # token pairs for the learner's rehearsal term
        self.system = system
        self.pool = pool
        self.source = source
        self.routing = SandboxRouting(config.sandbox)  # each task's sandbox backend, by risk
        self.gen_policy = gen_policy
        self.learn_policy = learn_policy
        self.reference = reference
        self.resume = resume
        self.recorder = recorder
        self.checkpoint_dir = checkpoint_dir
        self.segment = segment
        self.budget_s = budget_s  # the phase's wall time, across resumes
        self.elapsed_before_s = elapsed_before_s
        self.counts = counts
        self.stop = stop
        self.on_version = on_version
        self.chaos = chaos
        self.chaos_counts = chaos_counts or ChaosCounts()
        self.tasks: dict[str, Task] = {}
        self.open: dict[str, RolloutRequest] = {}
        self.done = anyio.Event()
        self._started = 0.0
        self._learner: list[Learner] = []
        blob = resume.curriculum if resume is not None else b""
        state = json.loads(blob) if blob else {}
        self.next_index: dict[int, int] = {int(k): v for k, v in state.get("next", {}).items()}
        # A killed segment never wrote its elapsed time to progress.json; its checkpoint did.
        self.elapsed_before_s = max(elapsed_before_s, float(state.get("elapsed_s", 0.0)))
        self.levels = LevelChooser(
            config.tasks,
            source.levels,
            group_size=config.episode.group_size,
            seed=config.seed * 7 + segment,
            state=state.get("levels"),
        )
        self.group_seq = 0
        self.requested_ids: set[str] = set()
        self._seen_consumed: set[str] = set(resume.consumed) if resume is not None else set()

    # -- the clock and the stop rule -------------------------------------------------------------

    def elapsed(self) -> float:
        if not self._started:
            return self.elapsed_before_s
        return self.elapsed_before_s + time.perf_counter() - self._started

    def _published(self, version: int) -> None:
        # Called in the learner's handler right after the step: its consumed set holds exactly
        # the samples of every step up to `version`.
        consumed = self._learner[0].core.consumed
        fresh = sorted(consumed - self._seen_consumed)
        self._seen_consumed = set(consumed)
        # What a resume after a kill needs, saved with every checkpoint: where each level's
        # task stream stood and how much of the RL budget was spent.
        self._learner[0].core.curriculum = self._curriculum_state()
        self.collector.try_tell(LearnerStepped(version=version, sample_ids=fresh))
        self.scheduler.try_tell(SandboxFreed())  # the gate may have reopened
        if self.on_version is not None:
            self.on_version(version)
        limit = self.config.rl.max_versions
        if limit and version >= limit:
            self.done.set()

    def _curriculum_state(self) -> bytes:
        state = {
            "next": self.next_index,
            "elapsed_s": self.elapsed(),
            "levels": self.levels.state(),
        }
        return json.dumps(state).encode()

    def _task_of(self, task_id: str) -> Task:
        return self.tasks[task_id]

    # -- running ---------------------------------------------------------------------------------

    async def run(self) -> RLOutcome:
        """Run the phase under its own supervisor, closed when the phase returns or fails: its
        actors' handlers are cancelled, so episodes that outlived the drain (recorded as
        cancelled) stop generating and running tests instead of competing with what follows.
        A cancelled episode's lease is released by its `finally` (a synchronous call)."""
        actors = self.system.supervisor("rl", max_restarts=RESTARTS_PER_MINUTE, within=60.0)
        try:
            return await self._run(actors)
        finally:
            actors.close()
            # The learner finishes a step in flight (its thread cannot be abandoned safely).
            with anyio.move_on_after(ASK_TIMEOUT_S) as scope:
                await actors.stopped.wait()
            if scope.cancelled_caught:
                _log.error("rl_actors_not_stopped", deadline_s=ASK_TIMEOUT_S)

    async def _run(self, actors: Supervisor) -> RLOutcome:
        cfg = self.config
        system = self.system
        book = TrainBook(cfg.learner.k, cfg.learner.batch_size)
        store = EpisodeStore()
        gen = actors.spawn(
            lambda: Generator(
                self.gen_policy,
                GeneratorConfig(
                    max_batch=cfg.generator.max_batch,
                    max_wait_s=cfg.generator.max_wait_s,
                    max_new_tokens=cfg.model.max_new_tokens,
                    temperature=cfg.model.temperature,
                    chunk_tokens=cfg.generator.chunk_tokens,
                    continuous=cfg.generator.continuous,
                    threads=rl_threads(cfg.generator.threads),
                    seed=cfg.seed * 1009 + self.segment,
                ),
            ),
            name="generator",
            mailbox_size=65536,
            **SURVIVE_CRASHES,
        )
        learner_config = LearnerConfig(
            batch_size=cfg.learner.batch_size,
            minibatches=cfg.learner.minibatches,
            lr=cfg.learner.lr,
            warmup_steps=cfg.learner.warmup_steps,
            correction=cfg.learner.correction,
            baseline=cfg.learner.baseline,
            advantage_scale=cfg.learner.advantage_scale,
            loss=LossConfig(
                kl_coef=cfg.learner.kl_coef,
                temperature=cfg.model.temperature,
                negative_weight=cfg.learner.negative_weight,
            ),
            k=cfg.learner.k,
            checkpoint_every=cfg.learner.checkpoint_every,
            checkpoint_dir=str(self.checkpoint_dir),
            keep_checkpoints=cfg.learner.keep_checkpoints,
            average_decay=cfg.learner.average_decay,
            imitation_coef=cfg.learner.imitation_coef,
            imitation_capacity=cfg.learner.imitation_capacity,
            imitation_batch=cfg.learner.imitation_batch,
            demo_coef=cfg.learner.demo_coef,
            demo_batch=cfg.learner.demo_batch,
            threads=rl_threads(cfg.learner.threads),
            seed=cfg.seed,
        )

        def make_learner() -> Learner:
            learner = Learner(
                self.learn_policy,
                learner_config,
                book=book,
                generator=gen,
                reference=self.reference,
                resume=self.resume if not self._learner else None,
                on_published=self._published,
                demonstrations=self.demonstrations,
            )
            self._learner[:] = [learner]
            return learner

        learner = actors.spawn(make_learner, name="learner", mailbox_size=65536, **SURVIVE_CRASHES)
        self.collector = actors.spawn(
            lambda: Collector(
                store=store,
                book=book,
                learner=learner,
                recorder=self.recorder,
                task_of=self._task_of,
                is_demo_level=self.source.is_demo_level,
                group_size=cfg.episode.group_size,
                counts=self.counts,
                rl_clock=self.elapsed,
                open_rollouts=self.open,
                skip_no_signal=cfg.learner.skip_equal_reward_groups,
                on_scored=self._scored,
                credit=cfg.episode.credit,
                partial_credit=cfg.episode.partial_credit,
                partial_credit_in=cfg.episode.partial_credit_in,
                hindsight=cfg.episode.hindsight,
                train_revisions=cfg.episode.train_revisions,
                seed=cfg.seed * 7919 + self.segment,
            ),
            name="collector",
            mailbox_size=65536,
            **SURVIVE_CRASHES,
        )
        client = GeneratorClient(gen, timeout_s=cfg.episode.deadline_s)
        verifier: Verifier = TestsVerifier()
        if cfg.episode.reuse_verdicts:
            verifier = ReusingVerifier(verifier)
        chaos, counts = self.chaos, self.chaos_counts
        if chaos is not None and chaos.generator_error:
            client = ChaosGeneratorClient(client, chaos, random.Random(chaos.seed + 1), counts)
        if chaos is not None and chaos.verifier_error:
            verifier = ChaosVerifier(verifier, chaos, random.Random(chaos.seed + 2), counts)
        room = cfg.model.max_len - cfg.model.max_new_tokens
        workers = [
            actors.spawn(
                lambda: EpisodeWorker(
                    task_of=self._task_of,
                    client=client,
                    book=book,
                    store=store,
                    max_turns=cfg.episode.max_turns,
                    prompt_room=room,
                    verifier=verifier,
                    solved_by=self.source.solved_by if cfg.episode.relabel != "off" else None,
                ),
                name=f"worker-{i}",
                mailbox_size=1,
                **SURVIVE_CRASHES,
            )
            for i in range(cfg.scheduler.workers)
        ]
        self.scheduler = actors.spawn(
            lambda: Scheduler(
                pool=self.pool,
                workers=workers,
                sink=self.collector,
                policy=make_scheduling_policy(cfg.scheduler.policy),
                config=SchedulerConfig(max_retries=cfg.scheduler.max_retries, seed=cfg.seed),
                gate=book,
            ),
            name="scheduler",
            mailbox_size=65536,
            **SURVIVE_CRASHES,
        )
        system.metrics.gauge("train.version", lambda: float(book.version))
        system.metrics.gauge("train.rl_elapsed_s", self.elapsed)
        self._started = time.perf_counter()
        budget = self.budget_s - self.elapsed_before_s
        interrupted = False
        async with anyio.create_task_group() as group:
            group.start_soon(self._feed)
            for at in chaos.restart_docker if chaos is not None else []:
                group.start_soon(self._restart_docker_at, at)
            with anyio.move_on_after(max(0.0, budget)):
                async with anyio.create_task_group() as waiters:

                    async def until(event: anyio.Event) -> None:
                        await event.wait()
                        waiters.cancel_scope.cancel()

                    waiters.start_soon(until, self.done)
                    waiters.start_soon(until, self.stop)
            interrupted = self.stop.is_set() and not self.done.is_set()
            book.close()
            group.cancel_scope.cancel()
        elapsed = self.elapsed()
        await self._drain()
        stats = await learner.ask(GetLearnerStatistics(), timeout=ASK_TIMEOUT_S)
        await self.collector.ask(FlushPending(), timeout=ASK_TIMEOUT_S)
        await self._checkpoint()
        await self.recorder.ask(Flush(), timeout=ASK_TIMEOUT_S)
        gen_tokens = int(system.metrics.counter("generator.tokens").value)
        return RLOutcome(
            version=stats.version,
            elapsed_s=elapsed,
            requested=len(self.requested_ids),
            interrupted=interrupted,
            learner={
                "steps": stats.steps,
                "optimizer_steps": stats.optimizer_steps,
                "samples": stats.samples,
                "dropped_stale": stats.dropped_stale,
                "duplicates": stats.duplicates,
                "staleness": {str(k): v for k, v in stats.staleness.items()},
                "max_staleness": stats.max_staleness,
                "idle_fraction": stats.idle_fraction,
            },
            generator_tokens=gen_tokens,
        )

    async def _restart_docker_at(self, at_s: float) -> None:
        """Chaos: restart the Docker daemon `at_s` seconds into the RL phase (across resumes)."""
        if self.elapsed() > at_s:
            return  # done in an earlier segment
        await anyio.sleep(at_s - self.elapsed())
        self.chaos_counts.restart_docker += 1
        try:
            await restart_docker_daemon()
        except DockerRestartError as exc:
            self.chaos_counts.restart_docker_failed += 1
            _log.error("chaos.docker_restart_failed", error=str(exc))

    # -- feeding ---------------------------------------------------------------------------------

    async def _feed(self) -> None:
        """Keep enough requests waiting that the gate, not the queue, decides what starts."""
        cfg = self.config
        group_size = cfg.episode.group_size
        target = cfg.scheduler.workers + 2 * group_size
        while True:
            while len(self.open) >= target:
                await self.counts.progress.wait()
            task = self._next_task(self.levels.draw())
            self.tasks[task.id] = task
            group_id = f"s{self.segment}-g{self.group_seq}"
            self.group_seq += 1
            ids = [f"{group_id}/{member}" for member in range(group_size)]
            # Logged before any request reaches the scheduler (the recorder's mailbox is FIFO,
            # so it precedes every terminal record of the group): see roost/train/lineage.py.
            await self.recorder.tell(
                RequestRecord(
                    group_id=group_id,
                    task_id=task.id,
                    level=task.level,
                    rollout_ids=ids,
                    wall=time.time(),
                )
            )
            for rollout_id in ids:
                request = RolloutRequest(
                    rollout_id=rollout_id,
                    task_id=task.id,
                    runtime=self.routing.key_for(task),
                    max_steps=cfg.episode.max_turns,
                    deadline_s=cfg.episode.deadline_s,
                )
                self.open[request.rollout_id] = request
                self.requested_ids.add(request.rollout_id)
                self.counts.requested += 1
                await self.scheduler.tell(request)

    def _next_task(self, level: int) -> Task:
        """The next training task of `level` that the form curriculum keeps (`LevelChooser.keep`;
        every form's chance is at least about 1/7, so this ends within a few draws; after
        `MAX_FORM_DRAWS` the last one drawn is taken)."""
        for _ in range(MAX_FORM_DRAWS):
            task, self.next_index[level] = self.source.train_task(
                level, self.next_index.get(level, 0)
            )
            if self.levels.keep(level, self.source.form(task)):
                break
        return task

    def _scored(self, task_id: str, level: int, passed: bool, first_passed: bool) -> None:
        form = self.source.form(self.tasks[task_id])
        self.levels.scored(task_id, level, passed, first_passed, form=form)

    # -- draining --------------------------------------------------------------------------------

    async def _drain(self) -> None:
        """Let running episodes finish (admission is closed); what never started, or outlives
        the drain timeout, is recorded as cancelled."""
        # Queued requests would otherwise wait out their deadline (minutes) behind the closed
        # gate and report long after the phase: they end here, each with its terminal record.
        await self.scheduler.ask(
            CancelQueued(reason="run ended: admission closed before it started"),
            timeout=ASK_TIMEOUT_S,
        )
        with anyio.move_on_after(self.config.rl.drain_timeout_s):
            # Polling while the run winds down: the scheduler's books are the one complete
            # view of what still runs, and this interval plays no part in any figure.
            while (await self.scheduler.ask(GetStatistics(), timeout=ASK_TIMEOUT_S)).in_flight:  # noqa: ASYNC110
                await anyio.sleep(0.2)
        await self.collector.ask(SyncCollector(), timeout=ASK_TIMEOUT_S)
        leftovers = sorted(self.open)
        for rollout_id in leftovers:
            request = self.open.pop(rollout_id)
            task = self.tasks[request.task_id]
            record = TrajectoryRecord(
                rollout_id=rollout_id,
                task_id=request.task_id,
                level=task.level,
                demo_level=self.source.is_demo_level(task.level),
                status="cancelled",
                reason="run ended: the rollout had not finished",
                wall=time.time(),
            )
            self.counts.cancelled += 1
            self.counts.failures["run ended"] = self.counts.failures.get("run ended", 0) + 1
            await self.recorder.tell(record)
        self.counts.wake()

    async def _checkpoint(self) -> None:
        """Save the learner's state, awaited to its end; past `ASK_TIMEOUT_S` it is reported
        (`checkpoint_overdue`), not abandoned. An abandoned save would go on reading the
        weights and optimizer while the learner, still running, may step on a late group and
        save (and prune) itself: a torn state under a whole file's name. And a deadline on a
        thread that is not abandoned fires only once the save is done, failing a saved run."""
        learner = self._learner[0]
        learner.core.curriculum = self._curriculum_state()

        async def watchdog() -> None:
            await anyio.sleep(ASK_TIMEOUT_S)
            _log.error("checkpoint_overdue", deadline_s=ASK_TIMEOUT_S, dir=str(self.checkpoint_dir))

        async with anyio.create_task_group() as group:
            group.start_soon(watchdog)
            path = await anyio.to_thread.run_sync(learner.core.save, self.checkpoint_dir)
            group.cancel_scope.cancel()
        _log.info("checkpoint_saved", path=str(path), version=learner.core.version)
