"""The scheduler actor driven directly: quotas, bad requests, broken action sources, the books,
late reports from workers the sweep declared lost."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import anyio
import pytest
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from actors.rollouts import RolloutFinished, RolloutRequest
from actors.sandbox_worker import Action, Assign, Outcome, SandboxWorker, WorkerDone
from actors.scheduler import (
    CancelQueued,
    GetStatistics,
    Quotas,
    Scheduler,
    SchedulerConfig,
    SchedulerStatistics,
)
from actors.sim_generator import SimulatedGenerator
from policies.scheduling import make_policy
from runtime import Actor, ActorRef, ActorSystem, handler
from runtime.distributions import Distribution
from sandboxes._spec import ExecResult, SandboxSpec
from sandboxes.pool import SandboxPool
from sandboxes.sim_cluster import RuntimeProfile, SimCluster

pytestmark = pytest.mark.anyio


class Sink(Actor):
    def __init__(self, records: list[RolloutFinished], expected: int, done: anyio.Event) -> None:
        self.records = records
        self.expected = expected
        self.done = done

    @handler
    def finished(self, msg: RolloutFinished) -> None:
        self.records.append(msg)
        if len(self.records) == self.expected:
            self.done.set()


class Broken:
    """An action source with a bug."""

    async def act(self, request: RolloutRequest, step: int, last: ExecResult | None) -> Action:
        raise KeyError("no such prompt")


async def run_requests(
    requests: list[RolloutRequest],
    *,
    actions: object | None = None,
    config: SchedulerConfig | None = None,
    workers: int = 4,
    expected: int | None = None,
) -> tuple[list[RolloutFinished], SchedulerStatistics]:
    profile = RuntimeProfile(cold_start=Distribution.constant(1.0), exec=Distribution.constant(0.5))
    cluster = SimCluster({"python": profile}, seed=0)
    spec = SandboxSpec(backend="sim", runtime="python")
    records: list[RolloutFinished] = []
    done = anyio.Event()
    source = actions or SimulatedGenerator(Distribution.constant(0.25))
    async with (
        SandboxPool(lambda key: cluster.sandbox(spec), capacity=8) as pool,
        ActorSystem(lag_interval=None) as system,
    ):
        sink = system.spawn(lambda: Sink(records, expected or len(requests), done), name="sink")
        refs = [
            system.spawn(lambda: SandboxWorker(source), name=f"w{i}", mailbox_size=1)  # type: ignore[arg-type]
            for i in range(workers)
        ]
        scheduler = system.spawn(
            lambda: Scheduler(
                pool=pool, workers=refs, sink=sink, policy=make_policy("fifo"), config=config
            ),
            name="scheduler",
        )
        for request in requests:
            await scheduler.tell(request)
        await done.wait()
        stats = await scheduler.ask(GetStatistics(), timeout=10.0)
    return records, stats


def req(i: int, **fields: object) -> RolloutRequest:
    return RolloutRequest(rollout_id=f"r{i}", task_id=f"t{i}", sim_pass_step=1, **fields)  # type: ignore[arg-type]


async def test_group_quota_bounds_rollouts_in_flight() -> None:
    requests = [req(i, group="capped") for i in range(12)] + [req(100 + i) for i in range(4)]
    config = SchedulerConfig(quotas=Quotas(group={"capped": 2}))
    records, stats = await run_requests(requests, config=config, workers=6)
    capped = [r for r in records if r.group == "capped"]
    events = sorted(
        [(r.started_at, 1) for r in capped] + [(r.finished_at, -1) for r in capped],
        key=lambda e: (e[0], e[1]),
    )
    running = peak = 0
    for _, delta in events:
        running += delta
        peak = max(peak, running)
    assert peak == 2
    assert stats.completed == 16
    assert stats.balanced


async def test_a_duplicate_rollout_id_is_refused_with_a_record() -> None:
    records, stats = await run_requests([req(1), req(1)], expected=2)
    statuses = sorted((r.status, r.reason) for r in records)
    assert statuses == [("completed", ""), ("failed", "duplicate rollout_id")]
    assert stats.rejected == 1
    assert stats.balanced


async def test_a_broken_action_source_fails_the_rollout_and_frees_the_worker() -> None:
    records, stats = await run_requests([req(i) for i in range(6)], actions=Broken(), workers=2)
    assert [r.status for r in records] == ["failed"] * 6
    assert all("KeyError" in r.reason for r in records)
    assert stats.failures_by_reason == {"error": 6}
    assert stats.in_flight == 0


def test_bad_requests_are_refused_at_construction_with_the_field_named() -> None:
    with pytest.raises(ValueError, match="max_steps must be >= 1"):
        RolloutRequest(rollout_id="r", task_id="t", max_steps=0)
    with pytest.raises(ValueError, match="rollout_id must not be empty"):
        RolloutRequest(rollout_id="", task_id="t")


@pytest.mark.parametrize(
    ("field", "value", "named"),
    [
        ("weights", {"g": 0.0}, "group 'g'"),
        ("weights", {"g": -1.0}, "group 'g'"),
        ("weights", {"g": float("nan")}, "group 'g'"),
        ("max_retries", -1, "max_retries"),
        ("backoff_s", float("nan"), "backoff_s"),
        ("lost_after_s", -1.0, "lost_after_s"),
        ("sweep_interval_s", 0.0, "sweep_interval_s"),
    ],
)
def test_a_bad_scheduler_config_is_refused_naming_the_field(
    field: str, value: object, named: str
) -> None:
    # A zero fair-share weight used to surface only at the first dispatch, as a bare
    # ZeroDivisionError inside the scheduler.
    with pytest.raises(ValueError, match=named):
        SchedulerConfig(**{field: value})  # type: ignore[arg-type]


def _instant_pool() -> SandboxPool:
    """Two simulated sandboxes that start and run in no time."""
    profile = RuntimeProfile(cold_start=Distribution.constant(0.0), exec=Distribution.constant(0.0))
    cluster = SimCluster({"python": profile}, seed=0)
    spec = SandboxSpec(backend="sim", runtime="python")
    return SandboxPool(lambda key: cluster.sandbox(spec), capacity=2)


class ClosingGate:
    """Admits until told to close (as a staleness gate closes while the learner waits)."""

    def __init__(self) -> None:
        self.closed = False

    def admits(self, in_flight: int) -> bool:
        return not self.closed


class FailsOnceWorker(Actor):
    """Reports an infrastructure failure on the first attempt (closing the gate as it does),
    and a pass on any later one."""

    def __init__(self, gate: ClosingGate, attempts: list[int]) -> None:
        self.gate = gate
        self.attempts = attempts

    @handler
    async def assign(self, msg: Assign) -> None:
        self.attempts.append(msg.attempt)
        msg.lease.release(healthy=msg.attempt > 1)
        if msg.attempt == 1:
            self.gate.closed = True
        outcome: Outcome = "infra" if msg.attempt == 1 else "passed"
        await msg.reply_to.tell(
            WorkerDone(
                rollout_id=msg.request.rollout_id,
                attempt=msg.attempt,
                outcome=outcome,
                started_at=0.0,
                worker=self.name,
                dispatch=msg.dispatch,
            )
        )


async def test_a_retry_is_dispatched_even_while_the_admission_gate_is_closed() -> None:
    # The gate admitted the rollout once; holding its retry back until the gate reopens can
    # wait forever when the gate waits on that very rollout (its group feeds the learner).
    gate, attempts = ClosingGate(), list[int]()
    records: list[RolloutFinished] = []
    done = anyio.Event()
    async with (
        _instant_pool() as pool,
        ActorSystem(lag_interval=None) as system,
    ):
        sink = system.spawn(lambda: Sink(records, 1, done), name="sink")
        worker = system.spawn(lambda: FailsOnceWorker(gate, attempts), name="w0", mailbox_size=1)
        scheduler = system.spawn(
            lambda: Scheduler(
                pool=pool,
                workers=[worker],
                sink=sink,
                policy=make_policy("fifo"),
                config=SchedulerConfig(max_retries=2, backoff_s=0.01),
                gate=gate,
            ),
            name="scheduler",
        )
        await scheduler.tell(req(0))
        with anyio.fail_after(10):
            await done.wait()
    assert gate.closed
    assert attempts == [1, 2]
    assert [(r.status, r.passed, r.attempts) for r in records] == [("completed", True, 2)]


def _behind_a_closed_gate(
    system: ActorSystem, pool: SandboxPool, sink: ActorRef, config: SchedulerConfig
) -> ActorRef:
    """A scheduler whose admission gate is closed: whatever it is told stays queued."""
    gate = ClosingGate()
    gate.closed = True
    return system.spawn(
        lambda: Scheduler(
            pool=pool, workers=[], sink=sink, policy=make_policy("fifo"), config=config, gate=gate
        ),
        name="scheduler",
    )


async def test_cancel_queued_ends_what_a_closed_gate_holds_back_with_its_records() -> None:
    # A run that closes admission must not leave its queued requests to wait out their
    # deadline behind the gate (they reported minutes after the RL phase had ended).
    records: list[RolloutFinished] = []
    done = anyio.Event()
    async with _instant_pool() as pool, ActorSystem(lag_interval=None) as system:
        sink = system.spawn(lambda: Sink(records, 3, done), name="sink")
        scheduler = _behind_a_closed_gate(system, pool, sink, SchedulerConfig())
        for i in range(3):
            await scheduler.tell(req(i, deadline_s=3600.0))
        before = await scheduler.ask(GetStatistics(), timeout=10.0)
        cancelled = await scheduler.ask(CancelQueued(reason="run ended: closed"), timeout=10.0)
        with anyio.fail_after(10):
            await done.wait()
        after = await scheduler.ask(GetStatistics(), timeout=10.0)
        again = await scheduler.ask(CancelQueued(reason="run ended: closed"), timeout=10.0)
    assert (before.pending, before.in_flight) == (3, 0)
    assert cancelled == 3
    assert again == 0
    assert [(r.rollout_id, r.status, r.reason) for r in records] == [
        (f"r{i}", "cancelled", "run ended: closed") for i in range(3)
    ]
    assert (after.pending, after.cancelled) == (0, 3)
    assert after.balanced


async def test_a_request_queued_past_its_deadline_is_cancelled_by_the_sweep() -> None:
    records: list[RolloutFinished] = []
    done = anyio.Event()
    async with _instant_pool() as pool, ActorSystem(lag_interval=None) as system:
        sink = system.spawn(lambda: Sink(records, 1, done), name="sink")
        scheduler = _behind_a_closed_gate(
            system, pool, sink, SchedulerConfig(sweep_interval_s=0.01)
        )
        await scheduler.tell(req(0, deadline_s=0.05))
        await scheduler.tell(req(1, deadline_s=3600.0))
        with anyio.fail_after(10):
            await done.wait()
        stats = await scheduler.ask(GetStatistics(), timeout=10.0)
    assert [(r.rollout_id, r.status, r.reason) for r in records] == [
        ("r0", "cancelled", "deadline passed while queued")
    ]
    assert (stats.pending, stats.cancelled) == (1, 1)
    assert stats.balanced


async def test_a_duplicate_of_a_queued_rollout_id_is_refused_with_a_record() -> None:
    # Two workers take r0 and r1, so r2 is still queued when its duplicates arrive. The check
    # once saw only rollouts in flight or retrying: a queued duplicate overwrote the original's
    # books (one record short, the books unbalanced, a quota slot held forever). The third r2
    # shows that refusing a duplicate leaves the original's id live.
    requests = [req(0), req(1), req(2), req(2), req(2)]
    with anyio.fail_after(60):
        records, stats = await run_requests(requests, workers=2, expected=5)
    assert sorted((r.rollout_id, r.status, r.reason) for r in records) == [
        ("r0", "completed", ""),
        ("r1", "completed", ""),
        ("r2", "completed", ""),
        ("r2", "failed", "duplicate rollout_id"),
        ("r2", "failed", "duplicate rollout_id"),
    ]
    assert (stats.requested, stats.rejected, stats.pending, stats.in_flight) == (5, 2, 0, 0)
    assert stats.balanced


class Forward(Actor):
    """A sink that hands each record to the test as it arrives."""

    def __init__(self, out: MemoryObjectSendStream[RolloutFinished]) -> None:
        self.out = out

    @handler
    def finished(self, msg: RolloutFinished) -> None:
        self.out.send_nowait(msg)


async def test_a_rollout_id_may_be_requested_again_once_its_rollout_has_ended() -> None:
    # Live ids are forgotten at the terminal record; a set that kept them would refuse a
    # legitimate resubmission as a duplicate.
    send, finished = anyio.create_memory_object_stream[RolloutFinished](10)
    source = SimulatedGenerator(Distribution.constant(0.25))
    async with (
        send,
        finished,
        _instant_pool() as pool,
        ActorSystem(lag_interval=None) as system,
    ):
        sink = system.spawn(lambda: Forward(send), name="sink")
        worker = system.spawn(lambda: SandboxWorker(source), name="w0", mailbox_size=1)
        scheduler = system.spawn(
            lambda: Scheduler(pool=pool, workers=[worker], sink=sink, policy=make_policy("fifo")),
            name="scheduler",
        )
        outcomes = []
        for _ in range(2):
            await scheduler.tell(req(0))
            with anyio.fail_after(10):
                record = await finished.receive()
            outcomes.append((record.rollout_id, record.status, record.reason))
        stats = await scheduler.ask(GetStatistics(), timeout=10.0)
    assert outcomes == [("r0", "completed", ""), ("r0", "completed", "")]
    assert (stats.completed, stats.rejected) == (2, 0)
    assert stats.balanced


class HoldingWorker(Actor):
    """Takes each assignment and hands it to the test, which reports it when it likes (a
    worker as slow as the test wants)."""

    def __init__(self, out: MemoryObjectSendStream[Assign]) -> None:
        self.out = out

    @handler
    def assign(self, msg: Assign) -> None:
        self.out.send_nowait(msg)


def _passed(assign: Assign) -> WorkerDone:
    assign.lease.release()
    return WorkerDone(
        rollout_id=assign.request.rollout_id,
        attempt=assign.attempt,
        outcome="passed",
        started_at=0.0,
        worker="w0",
        dispatch=assign.dispatch,
    )


@asynccontextmanager
async def _one_held_worker() -> AsyncIterator[
    tuple[ActorRef, MemoryObjectReceiveStream[Assign], MemoryObjectReceiveStream[RolloutFinished]]
]:
    """A scheduler with one worker, w0, that reports only when the test does (`_passed`), and
    a sweep that declares it lost 0.5 s past a rollout's deadline: (scheduler, the
    assignments w0 takes, the terminal records)."""
    send, assigned = anyio.create_memory_object_stream[Assign](10)
    sent, finished = anyio.create_memory_object_stream[RolloutFinished](10)
    config = SchedulerConfig(lost_after_s=0.5, sweep_interval_s=0.2)
    async with (
        send,
        assigned,
        sent,
        finished,
        _instant_pool() as pool,
        ActorSystem(lag_interval=None) as system,
    ):
        sink = system.spawn(lambda: Forward(sent), name="sink")
        worker = system.spawn(lambda: HoldingWorker(send), name="w0", mailbox_size=1)
        scheduler = system.spawn(
            lambda: Scheduler(
                pool=pool, workers=[worker], sink=sink, policy=make_policy("fifo"), config=config
            ),
            name="scheduler",
        )
        yield scheduler, assigned, finished


async def test_a_late_report_from_a_worker_declared_lost_does_not_free_it_twice() -> None:
    # The sweep frees a worker that has not reported past its rollout's deadline plus
    # `lost_after_s` and gives it the next rollout. The slow worker's report for the swept
    # rollout then freed it a second time: it held two rollouts at once, and a later
    # assignment could meet a full mailbox after its lease was taken.
    async with _one_held_worker() as (scheduler, assigned, finished):
        await scheduler.tell(req(0, deadline_s=1.0))
        await scheduler.tell(req(1, deadline_s=3600.0))
        await scheduler.tell(req(2, deadline_s=3600.0))
        with anyio.fail_after(10):
            slow = await assigned.receive()
            swept = await finished.receive()
            second = await assigned.receive()  # w0 was declared lost, so it is free for r1
        await scheduler.tell(_passed(slow))  # r0's report, too late
        after_late = await scheduler.ask(GetStatistics(), timeout=10.0)
        await anyio.wait_all_tasks_blocked()
        with pytest.raises(anyio.WouldBlock):  # w0 is still busy with r1: nothing more for it
            assigned.receive_nowait()
        await scheduler.tell(_passed(second))
        with anyio.fail_after(10):
            third = await assigned.receive()  # only r1's report frees w0
        await scheduler.tell(_passed(third))
        with anyio.fail_after(10):
            rest = [await finished.receive(), await finished.receive()]
        stats = await scheduler.ask(GetStatistics(), timeout=10.0)
    assert [a.request.rollout_id for a in (slow, second, third)] == ["r0", "r1", "r2"]
    assert (after_late.in_flight, after_late.pending, after_late.late_reports) == (1, 1, 1)
    assert [(r.rollout_id, r.status, r.reason) for r in [swept, *rest]] == [
        ("r0", "failed", "lost: the worker never reported"),
        ("r1", "completed", ""),
        ("r2", "completed", ""),
    ]
    assert (stats.completed, stats.failed, stats.late_reports, stats.in_flight) == (2, 1, 1, 0)
    assert stats.balanced


async def test_a_late_report_is_not_taken_for_a_new_rollout_of_the_same_id() -> None:
    # A swept id requested again lands on the same worker at attempt 1: the same (rollout id,
    # attempt) as the report still on its way. Only the assignment's number tells them apart.
    async with _one_held_worker() as (scheduler, assigned, finished):
        await scheduler.tell(req(0, deadline_s=1.0))
        with anyio.fail_after(10):
            slow = await assigned.receive()
            swept = await finished.receive()
        await scheduler.tell(req(0, deadline_s=3600.0))
        with anyio.fail_after(10):
            again = await assigned.receive()
        await scheduler.tell(_passed(slow))  # the first r0's report, too late
        after_late = await scheduler.ask(GetStatistics(), timeout=10.0)
        await scheduler.tell(_passed(again))
        with anyio.fail_after(10):
            done = await finished.receive()
        stats = await scheduler.ask(GetStatistics(), timeout=10.0)
    assert (slow.attempt, again.attempt) == (1, 1)
    assert slow.dispatch != again.dispatch
    assert (swept.status, done.status) == ("failed", "completed")
    assert (after_late.in_flight, after_late.completed, after_late.late_reports) == (1, 0, 1)
    assert (stats.completed, stats.failed, stats.late_reports, stats.in_flight) == (1, 1, 1, 0)
    assert stats.balanced
