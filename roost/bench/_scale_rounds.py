"""The machinery of `roost bench scale`: N rollouts in flight at once, traced, then timed.

A part builds one warm `SandboxPool`, N `SandboxWorker` actors and a FIFO `Scheduler`, then
plays three rounds of N rollouts on them, each submitted at once (the submitter yields every 64
requests, as any producer sharing the loop must):

1. the memory round: tracemalloc runs from before the pool exists until the moment the N-th
   rollout enters its episode (all N are then in flight), when the traced memory and a
   snapshot by source file are read and tracing stops. The round then finishes untraced and
   doubles as the warm-up of the next.
2. the timed round, CPython's collector as configured: event-loop lag sampled every 5 ms from
   the first request to the last record (as measured, and bounded by the loop's own CPU time,
   see `sample_lag`), the time to put all N in flight (dispatches per second), process
   CPU time, exec latencies.
3. the same with CPython's collector untuned (`gc_untuned`). The `ActorSystem` froze the actors,
   the pool and the warm sandboxes out of the collector's reach once they were spawned
   (`runtime.collector`); this round unfreezes them and restores CPython's thresholds, so a
   full collection walks every tracked object again: it shows what the runtime's tuning buys.

So that the peak really is N, each episode's first action waits until the N-th episode has
started (a barrier): a real generator behaves alike, it answers a wave of first turns only after
the prefill of the whole batch. The barrier also makes the fill a burst, the hardest case. It
opens in slices of `RELEASE_SLICE` episodes with a checkpoint between them, as a generator hands
out a big batch's replies: one `Event.set()` for all N would wake them in one loop iteration,
10,000 callbacks back to back (about 0.5 s with the loop stopped, measured by
scripts/probe_loop_lag.py), a stall of the harness's making, not the runtime's.
"""

from __future__ import annotations

import dataclasses
import os
import time
from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any

import anyio
import anyio.lowlevel

from actors.rollouts import RolloutFinished, RolloutRequest
from actors.sandbox_worker import Action, ActionSource, SandboxWorker
from actors.scheduler import GetStatistics, Scheduler, SchedulerConfig
from policies.scheduling import make_policy
from roost.bench._scale_probes import GC_MODES, MemoryProbe, gc_mode, sample_lag
from runtime import Actor, ActorSystem, Histogram, handler
from sandboxes._errors import SandboxInfraError
from sandboxes._protocol import Sandbox
from sandboxes._spec import ExecResult
from sandboxes.pool import SandboxPool

__all__ = ["PartSpec", "play_part"]

KiB = 1024
SUBMIT_YIELD_EVERY = 64
#: Episodes the barrier releases per loop iteration.
RELEASE_SLICE = 256
#: Starts and resets of 1,000 sandboxes share two cores: generous, but still a deadline.
SANDBOX_DEADLINE_S = 300.0


@dataclasses.dataclass(frozen=True)
class PartSpec:
    """What one part of the suite plays: its sandboxes, its action source, its requests."""

    name: str
    rollouts: int
    factory: Callable[[str], Sandbox]
    runtime: str
    source: ActionSource
    #: The requests of one round; `prefix` keeps rollout ids unique across rounds.
    requests: Callable[[str], list[RolloutRequest]]
    #: Sandboxes starting at once while warming the pool (the pool's start gate).
    start_concurrency: int | None
    round_timeout_s: float
    #: Source files whose allocations are the simulated backend's own (reported separately).
    backend_files: Sequence[str] = ()
    #: Turns every episode must take (a scripted model knows); None: any.
    expected_turns: int | None = None
    #: Also play a timed round with the collector untuned (see `gc_mode`).
    gc_untuned_round: bool = True


@dataclasses.dataclass
class _Round:
    target: int
    on_all_started: Callable[[], None] | None = None
    started: int = 0
    peak_in_flight: int = 0
    in_flight_when_all_started: int = 0
    records: list[RolloutFinished] = dataclasses.field(default_factory=list)
    all_finished: anyio.Event = dataclasses.field(default_factory=anyio.Event)
    all_started_at: float = 0.0
    #: The barrier, one gate per slice of `RELEASE_SLICE` episodes in the order they began.
    gates: list[anyio.Event] = dataclasses.field(default_factory=list)

    def gate(self, index: int) -> anyio.Event:
        slot = index // RELEASE_SLICE
        while len(self.gates) <= slot:
            self.gates.append(anyio.Event())
        return self.gates[slot]

    async def open_gates(self) -> None:
        for gate in self.gates:
            gate.set()
            await anyio.lowlevel.checkpoint()


class _CountingSource:
    """Wraps the part's action source: counts episodes, holds first turns until all began."""

    def __init__(self, inner: ActionSource) -> None:
        self.inner = inner
        self.round: _Round | None = None

    async def act(self, request: RolloutRequest, step: int, last: ExecResult | None) -> Action:
        current = self.round
        assert current is not None, "a rollout ran outside a round"
        if step == 0:
            gate = current.gate(current.started)
            current.started += 1
            in_flight = current.started - len(current.records)
            current.peak_in_flight = max(current.peak_in_flight, in_flight)
            if current.started == current.target:
                current.all_started_at = time.perf_counter()
                current.in_flight_when_all_started = in_flight
                if current.on_all_started is not None:
                    current.on_all_started()  # synchronous: nothing moves while it reads
                await current.open_gates()
            await gate.wait()
        return await self.inner.act(request, step, last)


class _Collector(Actor):
    def __init__(self, source: _CountingSource) -> None:
        self.source = source

    @handler
    def finished(self, msg: RolloutFinished) -> None:
        current = self.source.round
        assert current is not None
        current.records.append(msg)
        if len(current.records) == current.target:
            current.all_finished.set()


async def _prewarm(pool: SandboxPool, key: str, count: int) -> None:
    """Start `count` sandboxes (the pool's start gate bounds how many at once), leave them idle."""
    failures: list[str] = []

    async def warm() -> None:
        lease = pool.lease_nowait(key)
        try:
            await lease.ready()
        except SandboxInfraError as exc:
            failures.append(str(exc))  # the lease released itself
            return
        lease.release(healthy=True)

    async with anyio.create_task_group() as group:
        for _ in range(count):
            group.start_soon(warm)
    await pool.settle()
    if failures:
        raise RuntimeError(f"{len(failures)} of {count} sandboxes failed to start: {failures[0]}")


async def _play_round(
    scheduler: Any,
    source: _CountingSource,
    requests: list[RolloutRequest],
    rnd: _Round,
    limit: float,
) -> float:
    """Submit every request at once, wait for every record; returns when submission began."""
    source.round = rnd
    began = time.perf_counter()
    try:
        with anyio.fail_after(limit):
            for index, request in enumerate(requests):
                await scheduler.tell(request)
                if index % SUBMIT_YIELD_EVERY == 0:
                    # tell() returns without yielding while the mailbox has room: a producer
                    # sharing the loop must let it breathe, or the submission is one long stall.
                    await anyio.lowlevel.checkpoint()
            await rnd.all_finished.wait()
    except TimeoutError:
        raise RuntimeError(
            f"{len(rnd.records)} of {rnd.target} rollouts finished within {limit:.0f}s "
            f"({rnd.started} started)"
        ) from None
    return began


def _succeeded(record: RolloutFinished, expected_turns: int | None) -> bool:
    turns_ok = expected_turns is None or len(record.steps) == expected_turns
    return record.status == "completed" and record.passed and turns_ok


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[max(0, int(q * len(ordered) + 0.999999) - 1)] if ordered else 0.0


async def _timed_round(
    spec: PartSpec, scheduler: Any, source: _CountingSource, prefix: str
) -> dict[str, Any]:
    lag, own_lag = Histogram("loop_lag_s"), Histogram("loop_lag_own_s")
    timed = _Round(spec.rollouts)
    requests = spec.requests(prefix)
    cpu_before = time.process_time()
    async with anyio.create_task_group() as monitor:
        monitor.start_soon(sample_lag, lag, own_lag)
        began = await _play_round(scheduler, source, requests, timed, spec.round_timeout_s)
        wall = time.perf_counter() - began
        monitor.cancel_scope.cancel()
    cpu = time.process_time() - cpu_before
    fill_s = timed.all_started_at - began
    exec_s = [step.exec_s for record in timed.records for step in record.steps]
    return {
        "loop_lag_p99_ms": lag.percentile(0.99) * 1e3,
        "loop_lag_max_ms": lag.max * 1e3,
        "loop_lag_samples": lag.count,
        "loop_lag_own_p99_ms": own_lag.percentile(0.99) * 1e3,
        "loop_lag_own_max_ms": own_lag.max * 1e3,
        "peak_in_flight": timed.peak_in_flight,
        "dispatches_per_s": spec.rollouts / fill_s,
        "fill_s": fill_s,
        "round_s": wall,
        "rollouts_per_s": spec.rollouts / wall,
        "cpu_fraction": cpu / wall,
        "sandbox_exec_p50_ms": _percentile(exec_s, 0.50) * 1e3,
        "sandbox_exec_p99_ms": _percentile(exec_s, 0.99) * 1e3,
        "records": timed.records,
    }


async def play_part(spec: PartSpec) -> dict[str, Any]:
    """Build the part, play the memory round then a timed round per GC mode; its figures.

    The headline figures are those of the timed round with CPython's default collector; the
    same figures with CPython's collector untuned are under `gc_untuned`.
    """
    n = spec.rollouts
    probe = MemoryProbe(spec.backend_files)
    source = _CountingSource(spec.source)
    timed: dict[str, dict[str, Any]] = {}
    try:
        async with (
            SandboxPool(
                spec.factory,
                capacity=n,
                max_concurrent_starts=spec.start_concurrency,
                start_timeout=SANDBOX_DEADLINE_S,
                reset_timeout=SANDBOX_DEADLINE_S,
            ) as pool,
            ActorSystem(lag_interval=None, stop_timeout=60.0) as system,
        ):
            await _prewarm(pool, spec.runtime, n)
            collector = system.spawn(lambda: _Collector(source), name="collector", mailbox_size=n)
            workers = [
                system.spawn(lambda: SandboxWorker(source), name=f"worker-{i}", mailbox_size=1)
                for i in range(n)
            ]
            scheduler = system.spawn(
                lambda: Scheduler(
                    pool=pool,
                    workers=workers,
                    sink=collector,
                    policy=make_policy("fifo"),
                    config=SchedulerConfig(lost_after_s=spec.round_timeout_s),
                ),
                name="scheduler",
                mailbox_size=n,
            )
            traced = _Round(n, on_all_started=probe.read)
            await _play_round(scheduler, source, spec.requests("m"), traced, spec.round_timeout_s)
            await pool.settle()
            modes = GC_MODES if spec.gc_untuned_round else GC_MODES[:1]
            for mode in modes:
                with gc_mode(mode):
                    timed[mode] = await _timed_round(spec, scheduler, source, mode)
                await pool.settle()
            stats = await scheduler.ask(GetStatistics(), timeout=60.0)
            pool_stats = pool.statistics()
    finally:
        probe.stop()
    records = traced.records + [r for figures in timed.values() for r in figures.pop("records")]
    in_flight = traced.in_flight_when_all_started
    return {
        "rollouts": n,
        "load_average_1m": os.getloadavg()[0],
        **timed["default"],
        "kib_per_inflight_rollout": probe.peak_bytes / in_flight / KiB,
        "memory_in_flight": in_flight,
        "memory_by_source_kib_per_rollout": {
            group: size / in_flight / KiB
            for group, size in sorted(probe.by_group.items(), key=lambda item: -item[1])
        },
        "backend_kib_per_inflight_rollout": probe.backend_bytes / in_flight / KiB,
        **({"gc_untuned": timed["untuned"]} if "untuned" in timed else {}),
        "rounds": 1 + len(timed),
        "completed": sum(1 for r in records if r.status == "completed"),
        "passed": sum(1 for r in records if r.passed),
        "turns": dict(sorted(Counter(len(r.steps) for r in records).items())),
        "failures": sum(1 for r in records if not _succeeded(r, spec.expected_turns)),
        "failure_reasons": sorted({r.reason for r in records if r.reason}),
        "books_balanced": stats.balanced and not stats.in_flight and not stats.pending,
        "pool_quarantined": pool_stats.quarantined,
        "pool_cold_starts_after_warmup": pool_stats.cold_starts - n,
    }
