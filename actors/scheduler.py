"""`Scheduler`: the pending queue, quotas, dispatch to workers, retries and the final record.

Requests arrive as messages (submission never waits on a sandbox). Each time something changes
- a request, a worker done, a sandbox idle again, a retry due - the scheduler dispatches while
it can: an idle worker, a class of pending rollouts within its quotas, the admission gate open,
and a sandbox the pool can lease now. The scheduling policy picks which.

Outcomes (the failure taxonomy): a passed or failed episode *completes* the rollout (the
verdict is the reward's business); an infrastructure failure is retried on a fresh sandbox after
exponential backoff, at most `max_retries` times, then the rollout *fails* with the reason; a
rollout past its deadline is *cancelled* and its sandbox recycled; a worker bug fails it.
Exactly one `RolloutFinished` goes to the sink per rollout; `statistics()` checks the books.
"""

from __future__ import annotations

import collections
import dataclasses
import math
import random
from collections.abc import Callable, Mapping
from typing import Any, Protocol

from actors.rollouts import RolloutFinished, RolloutRequest, Status
from actors.sandbox_worker import Assign, WorkerDone
from policies.scheduling import ClassKey, PendingClass, PendingRollout, SchedulingPolicy
from runtime import Actor, ActorRef, Message, handler
from runtime.clock import now as clock_now
from sandboxes.pool import SandboxPool

__all__ = [
    "AdmissionGate",
    "CancelQueued",
    "Quotas",
    "SandboxFreed",
    "Scheduler",
    "SchedulerConfig",
    "SchedulerStatistics",
]


class AdmissionGate(Protocol):
    """Says whether one more rollout may start now (bounded staleness plugs in here)."""

    def admits(self, in_flight: int) -> bool: ...


class OpenGate:
    def admits(self, in_flight: int) -> bool:
        return True


@dataclasses.dataclass(frozen=True)
class Quotas:
    """Most rollouts in flight at once per group, runtime and tenant ("*": the default)."""

    group: Mapping[str, int] = dataclasses.field(default_factory=dict)
    runtime: Mapping[str, int] = dataclasses.field(default_factory=dict)
    tenant: Mapping[str, int] = dataclasses.field(default_factory=dict)

    @staticmethod
    def limit(table: Mapping[str, int], name: str) -> int | None:
        return table.get(name, table.get("*"))


@dataclasses.dataclass(frozen=True)
class SchedulerConfig:
    max_retries: int = 3
    backoff_s: float = 1.0
    backoff_max_s: float = 60.0
    weights: Mapping[str, float] = dataclasses.field(default_factory=dict)
    quotas: Quotas = dataclasses.field(default_factory=Quotas)
    #: Past a rollout's deadline plus this, a rollout whose worker never reported is failed.
    lost_after_s: float = 60.0
    sweep_interval_s: float = 10.0
    seed: int = 0

    def __post_init__(self) -> None:
        """:raises ValueError: naming the field (and the group) that is out of range."""
        if self.max_retries < 0:
            raise ValueError(f"max_retries: must be >= 0, got {self.max_retries}")
        for name in ("backoff_s", "backoff_max_s", "lost_after_s"):
            value = getattr(self, name)
            if not (math.isfinite(value) and value >= 0):
                raise ValueError(f"{name}: must be finite and >= 0, got {value}")
        interval = self.sweep_interval_s
        if not (math.isfinite(interval) and interval > 0):
            raise ValueError(f"sweep_interval_s: must be finite and > 0, got {interval}")
        # Checked here, at configuration, rather than by `fair_share` at its first dispatch
        # (where a zero weight divided by zero and a negative one inverted the order).
        for group, weight in self.weights.items():
            if not (math.isfinite(weight) and weight > 0):
                raise ValueError(f"weights: group {group!r} has {weight}; must be finite and > 0")


class SandboxFreed(Message):
    """A sandbox became idle: there may be something to dispatch."""


class Retry(Message):
    rollout_id: str


class Sweep(Message):
    """Periodic: fail rollouts whose worker vanished (a crash mid-episode) after a grace."""


class GetStatistics(Message):
    pass


class CancelQueued(Message):
    """Cancel every rollout still queued (not started, not waiting to retry) with `reason`;
    the reply is how many. A run that closes admission sends it: what the gate will never
    start ends now, with its terminal record, not when its deadline passes."""

    reason: str


@dataclasses.dataclass(frozen=True)
class SchedulerStatistics:
    requested: int
    completed: int
    failed: int
    cancelled: int
    pending: int
    in_flight: int
    retries: int
    rejected: int
    late_reports: int
    failures_by_reason: dict[str, int]
    #: Dispatches per group made while every group had work waiting (for fairness).
    contended_dispatches: dict[str, int]

    @property
    def balanced(self) -> bool:
        """requested = completed + failed + cancelled + pending + in flight."""
        settled = self.completed + self.failed + self.cancelled
        return self.requested == settled + self.pending + self.in_flight


@dataclasses.dataclass(slots=True)
class _InFlight:
    pending: PendingRollout
    worker: ActorRef
    deadline_at: float
    lease: Any = None
    dispatch: int = 0


class Scheduler(Actor):
    """Dispatches rollout requests to `workers` on sandboxes from `pool`; records go to `sink`."""

    def __init__(
        self,
        *,
        pool: SandboxPool,
        workers: list[ActorRef],
        sink: ActorRef,
        policy: SchedulingPolicy,
        config: SchedulerConfig | None = None,
        gate: AdmissionGate | None = None,
    ) -> None:
        self.pool = pool
        self.sink = sink
        self.policy = policy
        self.config = config or SchedulerConfig()
        self.gate = gate or OpenGate()
        self.rng = random.Random(self.config.seed)
        self._workers = {ref.name: ref for ref in workers}
        self._idle_workers = list(reversed(workers))
        self._idle_names = {ref.name for ref in workers}
        self._classes: dict[ClassKey, PendingClass] = {}
        self._pending = 0
        self._in_flight: dict[str, _InFlight] = {}
        #: Each busy worker's current assignment, by number: only a report of it frees the
        #: worker (a rollout id and attempt could recur: a swept id may be requested again).
        self._assigned: dict[str, int] = {}
        self._dispatches = 0
        #: Ids queued, in flight or waiting to retry: a request for one of these is a duplicate.
        self._live: set[str] = set()
        self._waiting_retry: dict[str, PendingRollout] = {}  # backing off
        self._retry_ready: collections.deque[PendingRollout] = collections.deque()
        self._seq = 0
        self._counts = {"requested": 0, "completed": 0, "failed": 0, "cancelled": 0}
        self._retries = 0
        self._rejected = 0
        self._late_reports = 0
        self._failures: dict[str, int] = {}
        self._dispatched: dict[str, int] = {}
        self._contended: dict[str, int] = {}
        self._groups_seen: set[str] = set()
        self._in_flight_by: dict[tuple[str, str], int] = {}
        self._durations: dict[tuple[str, str], float] = {}

    async def on_start(self) -> None:
        self.pool.on_idle(lambda key: self.ref.try_tell(SandboxFreed()))
        self.system.send_periodic(self.ref, Sweep(), self.config.sweep_interval_s)

    # -- the view policies read ----------------------------------------------------------------

    @property
    def now(self) -> float:
        return clock_now()

    def warm(self, runtime: str) -> int:
        return self.pool.idle(runtime)

    def weight(self, group: str) -> float:
        return self.config.weights.get(group, 1.0)

    def dispatched(self, group: str) -> int:
        return self._dispatched.get(group, 0)

    def expected_duration(self, group: str, runtime: str) -> float | None:
        return self._durations.get((group, runtime))

    # -- handlers --------------------------------------------------------------------------------

    @handler
    async def request(self, msg: RolloutRequest) -> None:
        self._counts["requested"] += 1
        if msg.rollout_id in self._live:
            self._rejected += 1
            await self._finish_unqueued(msg, "failed", "duplicate rollout_id")
            return
        self._live.add(msg.rollout_id)
        self._seq += 1
        self._enqueue(PendingRollout(self._seq, self.now, msg))
        await self._dispatch()

    @handler
    async def worker_done(self, msg: WorkerDone) -> None:
        flight = self._in_flight.get(msg.rollout_id)
        if flight is None or flight.dispatch != msg.dispatch:
            # Already settled by the sweep, which freed the worker then; it may hold a new
            # assignment by now, so this report must not free it again.
            self._late_reports += 1
            await self._dispatch()
            return
        del self._in_flight[msg.rollout_id]
        self._free_worker(msg.worker, msg.dispatch)
        request = flight.pending.request
        self._in_flight_by_add(request, -1)
        if msg.outcome in ("passed", "failed"):
            self._learn_duration(request, msg)
            await self._finish(flight.pending, "completed", "", msg, passed=msg.outcome == "passed")
        elif msg.outcome == "deadline":
            await self._finish(flight.pending, "cancelled", "deadline", msg)
        elif msg.outcome == "infra" and flight.pending.attempts <= self.config.max_retries:
            self._retries += 1
            self._waiting_retry[msg.rollout_id] = flight.pending
            backoff = min(
                self.config.backoff_max_s,
                self.config.backoff_s * 2 ** (flight.pending.attempts - 1),
            )
            self.system.send_after(self.ref, Retry(rollout_id=msg.rollout_id), backoff)
        else:
            reason = f"{msg.outcome}: {msg.reason}" if msg.reason else msg.outcome
            if msg.outcome == "infra":
                reason = f"infra: gave up after {flight.pending.attempts} attempts: {msg.reason}"
            await self._finish(flight.pending, "failed", reason, msg)
        await self._dispatch()

    @handler
    async def retry(self, msg: Retry) -> None:
        pending = self._waiting_retry.pop(msg.rollout_id, None)
        if pending is not None:
            self._retry_ready.append(pending)
        await self._dispatch()

    @handler
    async def sandbox_freed(self, msg: SandboxFreed) -> None:
        await self._dispatch()

    @handler
    async def sweep(self, msg: Sweep) -> None:
        now = self.now
        lost = [
            rid
            for rid, flight in self._in_flight.items()
            if now > flight.deadline_at + self.config.lost_after_s
        ]
        for rollout_id in lost:
            flight = self._in_flight.pop(rollout_id)
            self._in_flight_by_add(flight.pending.request, -1)
            # The worker crashed mid-episode (its supervisor restarted it, the assignment went
            # to the dead letters): its sandbox is recycled, and the worker is free again.
            if flight.lease is not None:
                flight.lease.release(healthy=False)
            self._free_worker(flight.worker.name, flight.dispatch)
            await self._finish(flight.pending, "failed", "lost: the worker never reported", None)
        # Queued past the deadline (a quota or a busy pool kept it back): cancel it now.
        await self._cancel_queued(
            lambda p: now >= p.enqueued_at + p.request.deadline_s, "deadline passed while queued"
        )
        if lost:
            await self._dispatch()

    @handler
    async def cancel_queued(self, msg: CancelQueued) -> int:
        return await self._cancel_queued(lambda p: True, msg.reason)

    async def _cancel_queued(self, which: Callable[[PendingRollout], bool], reason: str) -> int:
        """Take the queued rollouts that `which` picks out of their queues and finish each as
        cancelled with `reason`, in arrival order across classes; returns how many."""
        picked: list[PendingRollout] = []
        for cls in self._classes.values():
            chosen = [p for p in cls.items if which(p)]
            for pending in chosen:
                cls.items.remove(pending)
            picked += chosen
        self._pending -= len(picked)
        for pending in sorted(picked, key=lambda p: p.seq):
            await self._finish(pending, "cancelled", reason, None)
        return len(picked)

    @handler
    def get_statistics(self, msg: GetStatistics) -> SchedulerStatistics:
        return self.statistics()

    def statistics(self) -> SchedulerStatistics:
        return SchedulerStatistics(
            requested=self._counts["requested"],
            completed=self._counts["completed"],
            failed=self._counts["failed"],
            cancelled=self._counts["cancelled"],
            pending=self._pending + len(self._waiting_retry) + len(self._retry_ready),
            in_flight=len(self._in_flight),
            retries=self._retries,
            rejected=self._rejected,
            late_reports=self._late_reports,
            failures_by_reason=dict(self._failures),
            contended_dispatches=dict(self._contended),
        )

    # -- dispatch --------------------------------------------------------------------------------

    async def _dispatch(self) -> None:
        # Retries first, and past the admission gate: the gate admitted them once and its book
        # still counts them as started, so holding them back until it opens again can wait
        # forever (a learner that needs their group's samples to step, and so to open it).
        while self._idle_workers and self._retry_ready:
            pending = self._retry_ready[0]
            request = pending.request
            key = ClassKey(request.group, request.runtime, request.tenant, request.priority)
            if not self._may_start(self._classes.get(key) or PendingClass(key)):
                break
            self._retry_ready.popleft()
            await self._start(pending)
        while self._idle_workers and self._pending and self.gate.admits(len(self._in_flight)):
            candidates = [c for c in self._classes.values() if c.items and self._may_start(c)]
            if not candidates:
                return
            chosen, index = self.policy.choose(candidates, self, self.rng)
            pending = chosen.items[index]
            del chosen.items[index]
            self._pending -= 1
            if self._all_groups_waiting(chosen.group):
                group = chosen.group
                self._contended[group] = self._contended.get(group, 0) + 1
            await self._start(pending)

    def _all_groups_waiting(self, chosen: str) -> bool:
        # For fairness figures: was every known group backlogged when this one was served?
        waiting = {c.group for c in self._classes.values() if c.items}
        waiting.add(chosen)
        return waiting == self._groups_seen

    def _may_start(self, cls: PendingClass) -> bool:
        quotas = self.config.quotas
        key = cls.key
        for kind, table, name in (
            ("group", quotas.group, key.group),
            ("runtime", quotas.runtime, key.runtime),
            ("tenant", quotas.tenant, key.tenant),
        ):
            limit = Quotas.limit(table, name)
            if limit is not None and self._in_flight_by.get((kind, name), 0) >= limit:
                return False
        return self.pool.can_lease(key.runtime)

    async def _start(self, pending: PendingRollout) -> None:
        request: RolloutRequest = pending.request
        now = self.now
        deadline_at = pending.enqueued_at + request.deadline_s
        if now >= deadline_at:
            await self._finish(pending, "cancelled", "deadline passed while queued", None)
            return
        pending.attempts += 1
        worker = self._idle_workers.pop()
        self._idle_names.discard(worker.name)
        lease = self.pool.lease_nowait(request.runtime)
        self._dispatches += 1
        dispatch = self._dispatches
        self._in_flight[request.rollout_id] = _InFlight(
            pending, worker, deadline_at, lease, dispatch
        )
        self._assigned[worker.name] = dispatch
        self._in_flight_by_add(request, +1)
        self._dispatched[request.group] = self._dispatched.get(request.group, 0) + 1
        assign = Assign(
            request=request,
            attempt=pending.attempts,
            lease=lease,
            deadline_at=deadline_at,
            reply_to=self.ref,
            dispatch=dispatch,
        )
        if not worker.try_tell(assign):  # an idle worker's mailbox is empty: cannot happen
            raise RuntimeError(f"idle worker {worker.name} refused an assignment")

    # -- bookkeeping ---------------------------------------------------------------------------

    def _enqueue(self, pending: PendingRollout) -> None:
        request: RolloutRequest = pending.request
        self._groups_seen.add(request.group)
        key = ClassKey(request.group, request.runtime, request.tenant, request.priority)
        cls = self._classes.get(key)
        if cls is None:
            cls = self._classes[key] = PendingClass(key)
        cls.items.append(pending)
        self._pending += 1

    def _free_worker(self, name: str, dispatch: int) -> None:
        # Only the end of the worker's current assignment frees it. A worker declared lost is
        # freed at once and may take a new rollout; if it was only slow, its late report must
        # not free it a second time (it would then hold two rollouts at once).
        worker = self._workers.get(name)
        if worker is None or self._assigned.get(name) != dispatch:
            return
        del self._assigned[name]
        self._idle_names.add(name)
        self._idle_workers.append(worker)

    def _in_flight_by_add(self, request: RolloutRequest, delta: int) -> None:
        for key in (
            ("group", request.group),
            ("runtime", request.runtime),
            ("tenant", request.tenant),
        ):
            self._in_flight_by[key] = self._in_flight_by.get(key, 0) + delta

    def _learn_duration(self, request: RolloutRequest, done: WorkerDone) -> None:
        duration = self.now - done.started_at
        key = (request.group, request.runtime)
        previous = self._durations.get(key)
        self._durations[key] = duration if previous is None else 0.8 * previous + 0.2 * duration

    async def _finish(
        self,
        pending: PendingRollout,
        status: Status,
        reason: str,
        done: WorkerDone | None,
        *,
        passed: bool = False,
        was_live: bool = True,
    ) -> None:
        request: RolloutRequest = pending.request
        if was_live:
            self._live.discard(request.rollout_id)
        self._counts[status] += 1
        if status == "failed":
            kind = reason.split(":")[0]
            self._failures[kind] = self._failures.get(kind, 0) + 1
        record = RolloutFinished(
            rollout_id=request.rollout_id,
            task_id=request.task_id,
            group=request.group,
            runtime=request.runtime,
            tenant=request.tenant,
            status=status,
            reason=reason,
            passed=passed,
            attempts=pending.attempts,
            requested_at=pending.enqueued_at,
            started_at=done.started_at if done else None,
            finished_at=self.now,
            queue_wait_s=(done.started_at - pending.enqueued_at) if done else 0.0,
            acquire_s=done.acquire_s if done else 0.0,
            cold_start=done.cold_start if done else False,
            steps=list(done.steps) if done else [],
        )
        await self.sink.tell(record)

    async def _finish_unqueued(self, request: RolloutRequest, status: Status, reason: str) -> None:
        # Never queued, so not live: a rejected duplicate must leave its original's id live.
        pending = PendingRollout(0, self.now, request)
        await self._finish(pending, status, reason, None, was_live=False)


def config_from(data: Mapping[str, Any]) -> SchedulerConfig:
    """A `SchedulerConfig` from a plain mapping (a workload file's `[scheduler]` table)."""
    quotas = data.get("quotas", {})
    return SchedulerConfig(
        max_retries=int(data.get("max_retries", 3)),
        backoff_s=float(data.get("backoff_s", 1.0)),
        backoff_max_s=float(data.get("backoff_max_s", 60.0)),
        weights=dict(data.get("weights", {})),
        quotas=Quotas(**quotas),
        lost_after_s=float(data.get("lost_after_s", 60.0)),
        sweep_interval_s=float(data.get("sweep_interval_s", 10.0)),
        seed=int(data.get("seed", 0)),
    )
