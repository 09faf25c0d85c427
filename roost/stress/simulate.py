"""Run one scheduling policy on a workload, on the virtual clock, and measure it.

The cluster, the generator and the request stream are all seeded: the same workload, policy,
counts and seed give the same figures (only `wall` depends on the machine).
"""

from __future__ import annotations

import collections
import math
import random
import time
from pathlib import Path
from typing import Any

import anyio
import msgspec

from actors.rollouts import RolloutFinished, RolloutRequest
from actors.sandbox_worker import ActionSource, SandboxWorker
from actors.scheduler import (
    GetStatistics,
    Quotas,
    Scheduler,
    SchedulerConfig,
    SchedulerStatistics,
    Sweep,
)
from actors.sim_generator import SimulatedGenerator
from policies.scheduling import make_policy
from roost.chaos import ChaosActions, ChaosCounts, ChaosSandbox, ChaosSpec
from roost.stress.workload import Workload
from runtime import Actor, ActorSystem, handler
from runtime import run as run_loop
from runtime.faults import CrashInjector
from sandboxes._errors import SandboxInfraError
from sandboxes._spec import SandboxSpec
from sandboxes.pool import PoolStatistics, SandboxPool
from sandboxes.sim_cluster import SimCluster

__all__ = ["simulate"]

#: A run that has not accounted for every rollout after this much simulated time has lost one.
SIMULATED_LIMIT_S = 7 * 24 * 3600.0

#: Simulated seconds between utilization samples.
SAMPLE_EVERY_S = 5.0


class _Collector(Actor):
    """Keeps every terminal record; opens `done` when `expected` have arrived."""

    def __init__(self, expected: int, records: list[RolloutFinished], done: anyio.Event) -> None:
        self.expected = expected
        self.records = records
        self.done = done

    @handler
    def finished(self, msg: RolloutFinished) -> None:
        self.records.append(msg)
        if len(self.records) >= self.expected:
            self.done.set()


def simulate(
    workload: Workload,
    policy: str,
    *,
    rollouts: int,
    concurrency: int,
    seed: int,
    profile_dir: Path | None = None,
    chaos: ChaosSpec | None = None,
) -> dict[str, Any]:
    """Figures for one policy (see `roost stress --help` for the keys).

    With `chaos`, faults are injected as it says and the figures gain `chaos` (what was
    injected) and `lost` / `counted_twice` (rollout ids, which must both be empty).

    With `profile_dir`, the run's timing rows and metric snapshots are written there for
    `roost profile` (`rollouts.jsonl`, `metrics.jsonl`).
    """
    started = time.perf_counter()
    result: dict[str, Any] = run_loop(
        _simulate,
        workload,
        policy,
        rollouts,
        concurrency,
        seed,
        profile_dir,
        chaos,
        virtual_clock=True,
    )
    result["wall"] = {"seconds": time.perf_counter() - started}
    return result


async def _simulate(
    workload: Workload,
    policy_name: str,
    rollouts: int,
    concurrency: int,
    seed: int,
    profile_dir: Path | None,
    chaos: ChaosSpec | None,
) -> dict[str, Any]:
    options = workload.scheduler.policy_options.get(policy_name, {})
    counts = ChaosCounts()
    chaos_rng = random.Random(chaos.seed if chaos else 0)
    policy = make_policy(policy_name, options)
    cluster = SimCluster(workload.cluster.runtimes, faults=workload.faults, seed=seed + 1)
    specs = {rt: SandboxSpec(backend="sim", runtime=rt) for rt in workload.cluster.runtimes}
    records: list[RolloutFinished] = []
    snapshots: list[dict[str, Any]] = []
    utilization: list[tuple[float, float]] = []
    done = anyio.Event()
    capacity = workload.cluster.capacity
    async with (
        SandboxPool(
            (lambda key: cluster.sandbox(specs[key]))
            if chaos is None
            else (lambda key: ChaosSandbox(cluster.sandbox(specs[key]), chaos, chaos_rng, counts)),
            capacity=capacity,
            max_per_key=workload.cluster.max_per_runtime,
        ) as pool,
        ActorSystem(
            lag_interval=None,
            stop_timeout=math.inf,
            # Chaos crashes actors on purpose: restarts must not escalate and end the run.
            max_restarts=3 if chaos is None else 1_000_000_000,
            fault_injector=None
            if chaos is None
            else CrashInjector(
                chaos.crashes, seed=chaos.seed + 1, spare=(Sweep,), first_by=chaos.crash_first_by
            ),
        ) as system,
    ):
        await _prewarm(pool, workload)
        t0 = anyio.current_time()
        before = pool.statistics()
        generator: ActionSource = SimulatedGenerator(workload.generator.latency, seed=seed + 2)
        if chaos is not None:
            generator = ChaosActions(generator, chaos, chaos_rng, counts)
        collector = system.spawn(
            lambda: _Collector(rollouts, records, done), name="collector", mailbox_size=4096
        )
        workers = [
            system.spawn(lambda: SandboxWorker(generator), name=f"worker-{i}", mailbox_size=1)
            for i in range(concurrency)
        ]
        config = _scheduler_config(workload, seed)
        scheduler = system.spawn(
            lambda: Scheduler(
                pool=pool, workers=workers, sink=collector, policy=policy, config=config
            ),
            name="scheduler",
            mailbox_size=4096,
        )
        async with anyio.create_task_group() as sampler:
            sampler.start_soon(_sample_utilization, pool, capacity, t0, utilization)
            if profile_dir is not None:
                sampler.start_soon(_sample_metrics, system, t0, snapshots)
            await _submit(scheduler, workload, rollouts, seed)
            # A bug that loses a rollout must end in an error below, never in a silent hang.
            with anyio.move_on_after(SIMULATED_LIMIT_S):
                await done.wait()
            sampler.cancel_scope.cancel()
        makespan = anyio.current_time() - t0
        stats: SchedulerStatistics = await scheduler.ask(GetStatistics(), timeout=60.0)
        pool_stats = pool.statistics()
    if not stats.balanced or stats.in_flight or stats.pending:
        raise AssertionError(f"rollouts unaccounted for: {stats}")
    if profile_dir is not None:
        _write_profile_inputs(profile_dir, records, snapshots, t0)
    figures = _figures(
        policy_name, workload, records, stats, before, pool_stats, makespan, capacity, utilization
    )
    if chaos is not None:
        injector = system.fault_injector
        crashes = injector.crashes if injector is not None else {}
        seen = collections.Counter(r.rollout_id for r in records)
        submitted = {f"r{index}" for index in range(rollouts)}
        figures["chaos"] = {**counts.as_dict(), **{f"crash.{k}": v for k, v in crashes.items()}}
        figures["lost"] = sorted(submitted - set(seen))
        figures["counted_twice"] = sorted(i for i, n in seen.items() if n > 1)
        figures["leases_outstanding"] = pool_stats.busy
    return figures


async def _prewarm(pool: SandboxPool, workload: Workload) -> None:
    leases = [
        pool.lease_nowait(runtime)
        for runtime, count in sorted(workload.cluster.prewarm.items())
        for _ in range(count)
    ]

    async def warm(lease: Any) -> None:
        try:
            await lease.ready()
        except SandboxInfraError:
            return  # a failed start is released (and counted) by the lease itself
        lease.release(healthy=True)

    async with anyio.create_task_group() as group:
        for lease in leases:
            group.start_soon(warm, lease)
    await pool.settle()  # the resets finish: the sandboxes are idle (warm) at time zero


def _scheduler_config(workload: Workload, seed: int) -> SchedulerConfig:
    spec = workload.scheduler
    return SchedulerConfig(
        max_retries=spec.max_retries,
        backoff_s=spec.backoff_s,
        backoff_max_s=spec.backoff_max_s,
        weights={g.name: g.weight for g in workload.groups},
        quotas=Quotas(
            group=spec.quotas.group, runtime=spec.quotas.runtime, tenant=spec.quotas.tenant
        ),
        lost_after_s=spec.lost_after_s,
        sweep_interval_s=spec.sweep_interval_s,
        seed=seed + 3,
    )


async def _submit(scheduler: Any, workload: Workload, rollouts: int, seed: int) -> None:
    rng = random.Random(seed)
    groups = workload.groups
    shares = [g.share for g in groups]
    for index in range(rollouts):
        group = rng.choices(groups, weights=shares)[0]
        max_steps = group.max_steps or workload.max_steps
        await scheduler.tell(
            RolloutRequest(
                rollout_id=f"r{index}",
                task_id=f"{group.name}/{index}",
                group=group.name,
                runtime=group.runtime,
                tenant=group.tenant,
                priority=group.priority,
                max_steps=max_steps,
                deadline_s=group.deadline_s or workload.deadline_s,
                sim_pass_step=max(1, math.ceil(group.steps_to_pass.sample(rng))),
            )
        )
        if workload.arrivals is not None:
            await anyio.sleep(workload.arrivals.sample(rng))


async def _sample_utilization(
    pool: SandboxPool, capacity: int, t0: float, out: list[tuple[float, float]]
) -> None:
    while True:
        busy = pool.statistics().busy
        out.append((anyio.current_time() - t0, busy / capacity))
        await anyio.sleep(SAMPLE_EVERY_S)


async def _sample_metrics(system: ActorSystem, t0: float, out: list[dict[str, Any]]) -> None:
    # Handler timings are real CPU seconds against simulated ones here: left out, not misread.
    while True:
        snapshot = system.metrics.snapshot()
        row = {k: v for k, v in snapshot.items() if not k.endswith(".handler_s")}
        row["t"] = anyio.current_time() - t0
        out.append(row)
        await anyio.sleep(SAMPLE_EVERY_S)


def _write_profile_inputs(
    directory: Path, records: list[RolloutFinished], snapshots: list[dict[str, Any]], t0: float
) -> None:
    from roost.profile.model import timing_from_finished
    from roost.profile.sources import METRICS, ROLLOUTS, write_jsonl

    directory.mkdir(parents=True, exist_ok=True)
    rows = [timing_from_finished(r) for r in records]
    rows = [
        msgspec.structs.replace(r, requested_at=r.requested_at - t0, finished_at=r.finished_at - t0)
        for r in rows
    ]
    write_jsonl(directory / ROLLOUTS, rows)
    write_jsonl(directory / METRICS, snapshots)


def _percentile(ordered: list[float], q: float) -> float:
    if not ordered:
        return 0.0
    return ordered[max(0, math.ceil(q * len(ordered)) - 1)]


def _jain(values: list[float]) -> float:
    if not values or not any(values):
        return 1.0
    return sum(values) ** 2 / (len(values) * sum(v * v for v in values))


def _figures(
    policy: str,
    workload: Workload,
    records: list[RolloutFinished],
    stats: SchedulerStatistics,
    before: PoolStatistics,
    after: PoolStatistics,
    makespan: float,
    capacity: int,
    utilization: list[tuple[float, float]],
) -> dict[str, Any]:
    latencies = sorted(r.finished_at - r.requested_at for r in records)
    waits = sorted(r.queue_wait_s for r in records if r.started_at is not None)
    weights = {g.name: g.weight for g in workload.groups}
    contended = stats.contended_dispatches
    total = sum(contended.values())
    shares = {g: (contended.get(g, 0) / total if total else 0.0) for g in weights}
    weight_sum = sum(weights.values())
    normalized = [shares[g] / (weights[g] / weight_sum) for g in weights]
    return {
        "policy": policy,
        "requested": stats.requested,
        "completed": stats.completed,
        "failed": stats.failed,
        "cancelled": stats.cancelled,
        "passed": sum(1 for r in records if r.passed),
        "makespan_s": makespan,
        "throughput_per_s": len(records) / makespan if makespan > 0 else 0.0,
        "latency_p50_s": _percentile(latencies, 0.50),
        "latency_p99_s": _percentile(latencies, 0.99),
        "queue_wait_p99_s": _percentile(waits, 0.99),
        "utilization": (after.busy_seconds - before.busy_seconds) / (capacity * makespan)
        if makespan
        else 0.0,
        "cold_starts": after.cold_starts - before.cold_starts,
        "evictions": after.evictions - before.evictions,
        "quarantined": after.quarantined - before.quarantined,
        "retries": stats.retries,
        "failures_by_reason": dict(sorted(stats.failures_by_reason.items())),
        "fairness_jain": _jain(normalized),
        "contended_share": dict(sorted(shares.items())),
        "series": {
            "latency_s": latencies,
            "utilization": utilization,
        },
    }
