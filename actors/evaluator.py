"""`Evaluator`: scores finished episodes, checks itself, and watches the rewards it gives.

For each `EpisodeResult` it verifies the answer in a leased sandbox, then by who is to blame:

- agent (or a pass): reward from the verdict, sent to the learner as a `ScoredTrajectory`;
- infrastructure: retried on a fresh sandbox up to `max_infra_retries` times; if it persists
  the rollout becomes an `EvaluationDropped` record and never reaches the learner (a broken
  sandbox says nothing about the policy, so it must not be scored 0);
- evaluation (the verifier broke): the configured negative reward, counted; past
  `max_evaluation_failure_rate` over the monitor window the evaluator turns unhealthy.

Canaries: at start and every `canary_every` evaluations it scores known-good canonical
solutions and known-bad mutants of them. One misjudged canary turns it unhealthy: it keeps
scoring and counting, but withholds everything from the learner until a `Resume`. Every await
on a sandbox or verifier has a deadline; the evaluator handles one episode at a time (spawn
several for more throughput).
"""

from __future__ import annotations

import collections
from collections.abc import Mapping, Sequence
from typing import Literal

import anyio
import msgspec

from runtime import Actor, ActorRef, Message, handler
from sandboxes._errors import SandboxInfraError
from sandboxes.pool import SandboxPool
from tasks._lease import lease_within
from tasks._spec import Task, Verdict
from tasks._verify import Verifier, verifier_for
from tasks.monitor import Alarm, MonitorConfig, RewardMonitor
from tasks.mutants import full_program_task, mutants

__all__ = [
    "AlarmRaised",
    "EpisodeResult",
    "EvaluationDropped",
    "Evaluator",
    "EvaluatorConfig",
    "EvaluatorStatistics",
    "GetEvaluatorStatistics",
    "Resume",
    "ScoredTrajectory",
]


class EpisodeResult(Message):
    """An episode's final answer to score. `length` is its output length (tokens or chars)."""

    rollout_id: str
    task_id: str
    text: str
    group: str = "default"
    length: int = 0
    version: int = 0


class ScoredTrajectory(Message):
    """What the learner gets: the reward and the verdict behind it."""

    rollout_id: str
    task_id: str
    group: str
    reward: float
    verdict: Verdict
    version: int = 0


class EvaluationDropped(Message):
    """A rollout that could not be scored (infrastructure kept failing); kept out of training."""

    rollout_id: str
    task_id: str
    reason: str
    attempts: int


class AlarmRaised(Message):
    alarm: Alarm


class Resume(Message):
    """An operator's (or a policy's) decision: become healthy again, and either send what was
    withheld to the learner or discard it."""

    release_withheld: bool = False


class GetEvaluatorStatistics(Message):
    pass


class EvaluatorStatistics(msgspec.Struct, frozen=True, kw_only=True):
    healthy: bool
    unhealthy_reason: str
    evaluated: int
    passed: int
    agent_failures: int
    infrastructure_retries: int
    dropped: int
    evaluation_failures: int
    canary_runs: int
    canary_misjudged: int
    withheld: int
    alarms: int


class EvaluatorConfig(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """`reward`: "binary" (1 for a pass, else 0) or "fraction" (the share of tests passed)."""

    max_infra_retries: int = 2
    evaluation_failure_reward: float = -1.0
    max_evaluation_failure_rate: float = 0.2
    reward: Literal["binary", "fraction"] = "binary"
    canary_every: int = 200
    mutants_per_canary: int = 2
    lease_timeout_s: float = 60.0
    verify_timeout_s: float = 120.0
    max_withheld: int = 10_000
    monitor: MonitorConfig = msgspec.field(default_factory=MonitorConfig)


class Evaluator(Actor):
    """Scores `EpisodeResult`s; see the module docstring for the rules.

    :param tasks: task id -> task.
    :param pool: sandboxes, leased by each task's `runtime`.
    :param learner: gets `ScoredTrajectory`s while healthy.
    :param records: gets `EvaluationDropped` and `AlarmRaised` (optional).
    :param canaries: tasks with canonical solutions for the self-check.
    :param verifier: overrides `verifier_for(task)` (tests inject broken ones).
    """

    def __init__(
        self,
        tasks: Mapping[str, Task],
        pool: SandboxPool,
        learner: ActorRef,
        *,
        records: ActorRef | None = None,
        canaries: Sequence[Task] = (),
        config: EvaluatorConfig | None = None,
        verifier: Verifier | None = None,
    ) -> None:
        self.tasks = tasks
        self.pool = pool
        self.learner = learner
        self.records = records
        self.canaries = list(canaries)
        self.config = config or EvaluatorConfig()
        self.verifier = verifier
        self.monitor = RewardMonitor(self.config.monitor)
        self.healthy = True
        self.unhealthy_reason = ""
        self.withheld: collections.deque[ScoredTrajectory] = collections.deque(
            maxlen=self.config.max_withheld
        )
        self._recent_eval: collections.deque[bool] = collections.deque(
            maxlen=self.config.monitor.window
        )
        self._counts: collections.Counter[str] = collections.Counter()

    async def on_start(self) -> None:
        await self._run_canaries()

    @handler
    async def score(self, msg: EpisodeResult) -> None:
        task = self.tasks.get(msg.task_id)
        attempts = 0
        if task is None:
            verdict = Verdict.evaluation(f"unknown task {msg.task_id!r}")
        else:
            verdict, attempts = await self._verify_with_retries(task, msg.text)
        if verdict.failure == "infrastructure":
            self._counts["dropped"] += 1
            self.log.warning("evaluation_dropped", rollout=msg.rollout_id, reason=verdict.reason)
            await self._record(
                EvaluationDropped(
                    rollout_id=msg.rollout_id,
                    task_id=msg.task_id,
                    reason=verdict.reason,
                    attempts=attempts,
                )
            )
            return
        self._counts["evaluated"] += 1
        evaluation_failed = verdict.failure == "evaluation"
        self._counts[
            "passed"
            if verdict.passed
            else "evaluation_failures"
            if evaluation_failed
            else "agent_failures"
        ] += 1
        self._recent_eval.append(evaluation_failed)
        for alarm in self.monitor.observe(
            msg.group, passed=verdict.passed, length=msg.length, evaluation_failed=evaluation_failed
        ):
            self._counts["alarms"] += 1
            self.log.warning(
                "reward_alarm", kind=alarm.kind, group=alarm.group, detail=alarm.detail
            )
            await self._record(AlarmRaised(alarm=alarm))
        if evaluation_failed:
            self.log.error("evaluation_failure", rollout=msg.rollout_id, reason=verdict.reason)
            rate = sum(self._recent_eval) / len(self._recent_eval)
            if len(self._recent_eval) >= 10 and rate > self.config.max_evaluation_failure_rate:
                self._turn_unhealthy(f"evaluation failure rate {rate:.2f}")
        scored = ScoredTrajectory(
            rollout_id=msg.rollout_id,
            task_id=msg.task_id,
            group=msg.group,
            reward=self._reward(verdict),
            verdict=verdict,
            version=msg.version,
        )
        if self.healthy:
            await self.learner.tell(scored)
        else:
            self.withheld.append(scored)
        if self.config.canary_every and self._counts["evaluated"] % self.config.canary_every == 0:
            await self._run_canaries()

    @handler
    async def resume(self, msg: Resume) -> None:
        self.log.warning(
            "evaluator_resumed", withheld=len(self.withheld), released=msg.release_withheld
        )
        self.healthy, self.unhealthy_reason = True, ""
        pending, self.withheld = (
            list(self.withheld),
            collections.deque(maxlen=self.config.max_withheld),
        )
        if msg.release_withheld:
            for scored in pending:
                await self.learner.tell(scored)

    @handler
    def statistics(self, msg: GetEvaluatorStatistics) -> EvaluatorStatistics:
        c = self._counts
        return EvaluatorStatistics(
            healthy=self.healthy,
            unhealthy_reason=self.unhealthy_reason,
            evaluated=c["evaluated"],
            passed=c["passed"],
            agent_failures=c["agent_failures"],
            infrastructure_retries=c["infra_retries"],
            dropped=c["dropped"],
            evaluation_failures=c["evaluation_failures"],
            canary_runs=c["canary_runs"],
            canary_misjudged=c["canary_misjudged"],
            withheld=len(self.withheld),
            alarms=c["alarms"],
        )

    # -- scoring ----------------------------------------------------------------------------

    def _reward(self, verdict: Verdict) -> float:
        if verdict.failure == "evaluation":
            return self.config.evaluation_failure_reward
        if self.config.reward == "fraction":
            return verdict.score
        return 1.0 if verdict.passed else 0.0

    async def _verify_with_retries(self, task: Task, text: str) -> tuple[Verdict, int]:
        verdict = Verdict.infrastructure("not attempted")
        attempts = 0
        while attempts <= self.config.max_infra_retries:
            attempts += 1
            verdict = await self._verify_once(task, text)
            if verdict.failure != "infrastructure":
                break
            self._counts["infra_retries"] += 1
        return verdict, attempts

    async def _verify_once(self, task: Task, text: str) -> Verdict:
        verifier = self.verifier or verifier_for(task)
        try:
            lease = await lease_within(self.pool, task.runtime, self.config.lease_timeout_s)
        except SandboxInfraError as exc:
            return Verdict.infrastructure(str(exc))
        verdict = Verdict.infrastructure("the verifier did not answer before the deadline")
        try:
            with anyio.move_on_after(self.config.verify_timeout_s):
                sandbox = await lease.ready()
                verdict = await verifier.verify(task, text, sandbox)
        except SandboxInfraError as exc:
            verdict = Verdict.infrastructure(str(exc))
        finally:
            # A sandbox that failed (or might still run something) is never reused.
            lease.release(healthy=verdict.failure != "infrastructure")
        return verdict

    # -- self-check -------------------------------------------------------------------------

    async def _run_canaries(self) -> None:
        if not self.canaries:
            return
        self._counts["canary_runs"] += 1
        for task in self.canaries:
            if task.canonical_solution is None:
                continue
            checks: list[tuple[str, Task, str, bool]] = [
                ("canonical", task, task.canonical_solution, True)
            ]
            whole = full_program_task(task)
            for mutant in mutants(task)[: self.config.mutants_per_canary]:
                checks.append((f"mutant {mutant.kind}", whole, mutant.program, False))
            for what, subject, text, should_pass in checks:
                verdict, _ = await self._verify_with_retries(subject, text)
                if verdict.failure == "infrastructure":
                    continue  # says nothing about the verifier; the next round will tell
                misjudged = verdict.failure == "evaluation" or verdict.passed != should_pass
                if misjudged:
                    self._counts["canary_misjudged"] += 1
                    self._turn_unhealthy(
                        f"canary {task.id} ({what}) misjudged: passed={verdict.passed} "
                        f"failure={verdict.failure} {verdict.reason}"
                    )
                    return

    def _turn_unhealthy(self, reason: str) -> None:
        if self.healthy:
            self.log.error("evaluator_unhealthy", reason=reason)
        self.healthy, self.unhealthy_reason = False, reason

    async def _record(self, message: Message) -> None:
        if self.records is not None:
            await self.records.tell(message)
