"""Pieces of `SandboxPool` that stand alone: its statistics record, the gate every start passes
(concurrency and rate), the reaper hook, and what the pool asks of a sandbox beyond the
`Sandbox` protocol (validation and snapshots, offered by the real backends)."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Protocol, runtime_checkable

import anyio
import structlog
from typing_extensions import TypeIs

from runtime.clock import now as clock_now
from runtime.metrics import Histogram

__all__ = [
    "DockerReaper",
    "PoolExhaustedError",
    "PoolReaper",
    "PoolStatistics",
    "StartGate",
    "Validating",
]

_log = structlog.get_logger("roost.pool")


class PoolExhaustedError(RuntimeError):
    """`lease_nowait` found no idle sandbox and no room to start one; check `can_lease` first."""


@dataclasses.dataclass(frozen=True)
class PoolStatistics:
    """Counts since the pool opened, and occupancy now. `cold_starts` are the misses (a lease
    that had to start a sandbox), `warm_hits` the hits; `destroyed` counts every sandbox closed
    for any reason (quarantine, failed validation, eviction, idle timeout)."""

    capacity: int
    total: int
    busy: int
    idle: int
    starting: int
    warm_hits: int
    cold_starts: int
    evictions: int
    quarantined: int
    start_failures: int
    resets: int
    busy_seconds: float
    starts: int = 0
    destroyed: int = 0
    validation_failures: int = 0
    idle_expired: int = 0
    acquire_p50_s: float = math.nan
    acquire_p95_s: float = math.nan


@runtime_checkable
class Validating(Protocol):
    """A sandbox that can say how it differs from its pristine state and can be started from a
    snapshot (the process, docker and gvisor backends)."""

    async def validate(self) -> list[str]: ...

    async def snapshot(self) -> bytes: ...

    async def restore(self, archive: bytes) -> None: ...


_validating_types: dict[type, bool] = {}


def is_validating(sandbox: object) -> TypeIs[Validating]:
    """`isinstance(sandbox, Validating)`, remembered per class: a runtime-checkable Protocol
    inspects every member on each call (about 50 us), and the pool asks on every release."""
    kind = type(sandbox)
    known = _validating_types.get(kind)
    if known is None:
        known = _validating_types[kind] = isinstance(sandbox, Validating)
    return known


class PoolReaper(Protocol):
    """Removes leftovers of crashed runs when the pool opens, and this run's when it closes."""

    async def at_start(self) -> None: ...

    async def at_exit(self) -> None: ...


class DockerReaper:
    """The labelled-container reaper of `sandboxes._reaper`, as a pool hook. An unreachable
    daemon is logged, not raised: a pool of process sandboxes must not need Docker."""

    async def at_start(self) -> None:
        await self._reap(run_id=None)

    async def at_exit(self) -> None:
        from sandboxes._reaper import RUN_ID

        await self._reap(run_id=RUN_ID)

    async def _reap(self, *, run_id: str | None) -> None:
        from sandboxes._docker_calls import docker_client
        from sandboxes._errors import SandboxInfraError
        from sandboxes._reaper import reap

        try:
            docker = docker_client()
        except SandboxInfraError as exc:
            _log.warning("pool.reap_failed", error=str(exc))
            return
        try:
            await reap(docker, run_id=run_id, expired=True)
        except SandboxInfraError as exc:
            _log.warning("pool.reap_failed", error=str(exc))
        finally:
            await docker.close()


class StartGate:
    """At most `concurrency` starts at once, and (with `per_second`) starts begun no faster than
    that rate: a burst of cold leases must not stampede the Docker daemon."""

    def __init__(self, *, concurrency: int | None, per_second: float | None) -> None:
        if concurrency is not None and concurrency < 1:
            raise ValueError(f"max_concurrent_starts must be at least 1, got {concurrency}")
        if per_second is not None and not per_second > 0:
            raise ValueError(f"max_starts_per_s must be positive, got {per_second}")
        self._limiter = anyio.CapacityLimiter(concurrency) if concurrency else None
        self._interval = 1.0 / per_second if per_second else 0.0
        self._next_at = -math.inf
        self.latency = Histogram("pool.start_wait_s")

    @asynccontextmanager
    async def slot(self) -> AsyncIterator[None]:
        asked = clock_now()
        if self._limiter is None:
            await self._pace()
            self.latency.record(clock_now() - asked)
            yield
            return
        async with self._limiter:
            await self._pace()
            self.latency.record(clock_now() - asked)
            yield

    async def _pace(self) -> None:
        if not self._interval:
            return
        now = clock_now()
        at = max(now, self._next_at)
        self._next_at = at + self._interval
        if at > now:
            await anyio.sleep(at - now)
