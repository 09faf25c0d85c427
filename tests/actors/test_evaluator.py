"""The evaluator: each failure kind handled by its rule, canaries catch a broken verifier, the
reward monitor's alarms go out, and an unhealthy evaluator feeds the learner nothing."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable, Sequence
from typing import Any

import anyio
import pytest

from actors.evaluator import (
    AlarmRaised,
    EpisodeResult,
    EvaluationDropped,
    Evaluator,
    EvaluatorConfig,
    EvaluatorStatistics,
    GetEvaluatorStatistics,
    Resume,
    ScoredTrajectory,
)
from runtime import Actor, ActorSystem, handler
from sandboxes._protocol import Sandbox
from sandboxes.pool import SandboxPool
from tasks import MonitorConfig, ProceduralTasks, Task, TestOutcome, TestsVerifier, Verdict
from tests.conftest import REAL
from tests.tasks._helpers import ADD_ONE, FakeSandbox
from tests.tasks._pool import process_pool

pytestmark = pytest.mark.anyio

PASS = Verdict(passed=True, score=1.0, tests=[TestOutcome(name="t", status="passed")])
FAIL = Verdict(passed=False, score=0.25, failure="agent", reason="t: failed")
INFRA = Verdict.infrastructure("container died")
EVAL = Verdict.evaluation("harness gave garbage")


class Collector(Actor):
    def __init__(self, into: list[Any]) -> None:
        self.into = into

    @handler(ScoredTrajectory, EvaluationDropped, AlarmRaised)
    def collect(self, msg: Any) -> None:
        self.into.append(msg)


class Scripted:
    """A verifier that answers from a script (a function of the call number)."""

    def __init__(self, script: Callable[[int], Verdict | None]) -> None:
        self.script = script
        self.calls = 0

    async def verify(self, task: Task, text: str, sandbox: Sandbox) -> Verdict:
        self.calls += 1
        verdict = self.script(self.calls)
        if verdict is None:
            await anyio.sleep_forever()
        assert verdict is not None
        return verdict


@contextlib.asynccontextmanager
async def evaluator(
    verifier: Any,
    *,
    pool: SandboxPool | None = None,
    canaries: Sequence[Task] = (),
    config: EvaluatorConfig | None = None,
) -> AsyncIterator[tuple[Any, list[Any], list[Any]]]:
    learned: list[Any] = []
    records: list[Any] = []
    async with contextlib.AsyncExitStack() as stack:
        if pool is None:
            pool = await stack.enter_async_context(
                SandboxPool(lambda key: FakeSandbox(), capacity=2)
            )
        system = await stack.enter_async_context(ActorSystem(lag_interval=None))
        learner = system.spawn(lambda: Collector(learned), name="learner")
        sink = system.spawn(lambda: Collector(records), name="records")
        ref = system.spawn(
            lambda: Evaluator(
                {ADD_ONE.id: ADD_ONE, **{t.id: t for t in canaries}},
                pool,
                learner,
                records=sink,
                canaries=canaries,
                config=config,
                verifier=verifier,
            ),
            name="evaluator",
        )
        yield ref, learned, records


def episode(i: int, *, task: str = ADD_ONE.id, length: int = 100) -> EpisodeResult:
    return EpisodeResult(
        rollout_id=f"r{i}", task_id=task, text="    return x + 1\n", group="g", length=length
    )


async def stats(ref: Any) -> EvaluatorStatistics:
    result = await ref.ask(GetEvaluatorStatistics(), timeout=30)
    assert isinstance(result, EvaluatorStatistics)
    return result


async def test_persistent_infrastructure_failures_are_dropped_never_scored() -> None:
    verifier = Scripted(lambda n: INFRA)
    async with evaluator(verifier) as (ref, learned, records):
        await ref.tell(episode(1))
        s = await stats(ref)
    assert learned == []  # never a reward of 0
    [dropped] = records
    assert isinstance(dropped, EvaluationDropped)
    assert dropped.attempts == 3
    assert (s.dropped, s.infrastructure_retries, s.evaluated) == (1, 3, 0)
    assert verifier.calls == 3


async def test_a_transient_infrastructure_failure_is_retried_and_scored() -> None:
    async with evaluator(Scripted(lambda n: INFRA if n == 1 else PASS)) as (ref, learned, _):
        await ref.tell(episode(1))
        s = await stats(ref)
    [scored] = learned
    assert scored.reward == 1.0
    assert scored.verdict.passed
    assert (s.infrastructure_retries, s.passed, s.dropped) == (1, 1, 0)


async def test_a_verifier_that_never_answers_is_cut_off_as_infrastructure() -> None:
    config = EvaluatorConfig(verify_timeout_s=5.0, max_infra_retries=1)
    async with evaluator(Scripted(lambda n: None), config=config) as (ref, learned, records):
        await ref.tell(episode(1))
        s = await stats(ref)
    assert learned == []
    assert s.dropped == 1
    assert "deadline" in records[0].reason


async def test_evaluation_failures_get_the_configured_negative_reward() -> None:
    config = EvaluatorConfig(evaluation_failure_reward=-0.5)
    async with evaluator(Scripted(lambda n: EVAL), config=config) as (ref, learned, _):
        await ref.tell(episode(1))
        await ref.tell(episode(2, task="no-such-task"))
        s = await stats(ref)
    assert [t.reward for t in learned] == [-0.5, -0.5]
    assert "unknown task" in learned[1].verdict.reason
    assert s.evaluation_failures == 2


async def test_agent_failures_are_scored_binary_or_by_fraction() -> None:
    async with evaluator(Scripted(lambda n: FAIL)) as (ref, learned, _):
        await ref.tell(episode(1))
        await stats(ref)
    config = EvaluatorConfig(reward="fraction")
    async with evaluator(Scripted(lambda n: FAIL), config=config) as (ref, fraction, _):
        await ref.tell(episode(1))
        s = await stats(ref)
    assert learned[0].reward == 0.0
    assert fraction[0].reward == 0.25
    assert s.agent_failures == 1


async def test_too_many_evaluation_failures_make_it_unhealthy_until_resumed() -> None:
    config = EvaluatorConfig(max_evaluation_failure_rate=0.2)
    verifier = Scripted(lambda n: EVAL if n % 2 else PASS)
    async with evaluator(verifier, config=config) as (ref, learned, _):
        for i in range(20):
            await ref.tell(episode(i))
        s = await stats(ref)
        assert not s.healthy
        assert "evaluation failure rate" in s.unhealthy_reason
        fed = len(learned)
        assert s.withheld == 20 - fed > 0
        await ref.tell(Resume(release_withheld=True))
        s = await stats(ref)
    assert s.healthy
    assert s.withheld == 0
    assert len(learned) == 20


async def test_a_pass_rate_jump_raises_an_alarm() -> None:
    config = EvaluatorConfig(monitor=MonitorConfig(window=20, min_baseline=20, jump=0.5))
    verifier = Scripted(lambda n: FAIL if n <= 60 else PASS)
    async with evaluator(verifier, config=config) as (ref, _, records):
        for i in range(90):
            await ref.tell(episode(i))
        s = await stats(ref)
    alarms = [r.alarm for r in records if isinstance(r, AlarmRaised)]
    assert [a.kind for a in alarms] == ["pass_rate_jump"]
    assert s.alarms == 1


class AlwaysPass:
    """A deliberately broken verifier: it passes everything."""

    async def verify(self, task: Task, text: str, sandbox: Sandbox) -> Verdict:
        return PASS


class BreaksAfter:
    """The real verifier until call `n`, then it inverts every verdict."""

    def __init__(self, n: int) -> None:
        self.n, self.calls, self.real = n, 0, TestsVerifier()

    async def verify(self, task: Task, text: str, sandbox: Sandbox) -> Verdict:
        self.calls += 1
        verdict = await self.real.verify(task, text, sandbox)
        if self.calls <= self.n:
            return verdict
        return PASS if not verdict.passed else FAIL


CANARIES = [ProceduralTasks(seed=2).task(level, 0) for level in (1, 4)]


@pytest.mark.parametrize("anyio_backend", [REAL])
async def test_canaries_pass_with_the_real_verifier() -> None:
    async with (
        process_pool(2) as pool,
        evaluator(None, pool=pool, canaries=CANARIES) as (ref, learned, _),
    ):
        await ref.tell(episode(1))
        s = await stats(ref)
    assert s.healthy
    assert s.canary_runs == 1
    assert s.canary_misjudged == 0
    assert len(learned) == 1
    assert learned[0].verdict.passed


@pytest.mark.parametrize("anyio_backend", [REAL])
async def test_canaries_catch_a_broken_verifier_at_start() -> None:
    async with (
        process_pool(2) as pool,
        evaluator(AlwaysPass(), pool=pool, canaries=CANARIES) as (ref, learned, _),
    ):
        await ref.tell(episode(1))
        s = await stats(ref)
    assert not s.healthy
    assert "mutant" in s.unhealthy_reason
    assert learned == []
    assert s.withheld == 1


@pytest.mark.parametrize("anyio_backend", [REAL])
async def test_periodic_canaries_catch_a_verifier_that_breaks_later() -> None:
    config = EvaluatorConfig(canary_every=3, mutants_per_canary=1)
    verifier = BreaksAfter(n=4 + 3)  # the start-up canaries (2 x 2), then three episodes
    async with (
        process_pool(2) as pool,
        evaluator(verifier, pool=pool, canaries=CANARIES, config=config) as (ref, learned, _),
    ):
        for i in range(5):
            await ref.tell(episode(i))
        s = await stats(ref)
    assert s.canary_runs == 2
    assert not s.healthy
    assert len(learned) == 3
    assert s.withheld == 2
