"""`SandboxPool`: warm sandboxes per key, leased without waiting, reset and validated off-path.

The scheduler must never wait on a sandbox, so leasing is split in two: `lease_nowait(key)`
decides at once (a warm sandbox, or a new one that will start; the pool makes room by evicting
the least recently used idle sandbox of another key when it is full), and the worker that got
the lease pays for a cold start by awaiting `Lease.ready()`. `async with pool.lease(key)` wraps
both (waiting, up to a deadline, for room) and releases on exit.

Releasing is immediate: the reset before reuse runs in the pool's own tasks, followed by a
validation (the sandbox's `validate()`, where it has one: no stray process, files as pristine,
disk as free as it was, a command still runs). A sandbox returns to the idle set only when both
succeed; otherwise it is destroyed, never handed out, and (with `min_idle`) replaced. A sandbox
released unhealthy (an infrastructure error) is quarantined: destroyed, not reset.

Optional: `min_idle` keeps that many warm sandboxes per key, `idle_timeout_s` destroys idle ones
past that age (down to `min_idle`), `max_concurrent_starts` and `max_starts_per_s` gate starts,
`prepare` runs once per key on a fresh sandbox whose work directory is then captured and
restored into every other sandbox of the key (a snapshot), and `reaper` removes leftovers when
the pool opens and closes. Every start, reset, validation, close and reap has a deadline.

A failure in the pool's own tasks (a reset, a `prepare`, a close) costs only its sandbox, never
the pool. A pool that exits with an error still closes every sandbox it holds, resets cut off
included, each under its close deadline.
"""

from __future__ import annotations

import collections
import math
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import asynccontextmanager
from types import TracebackType
from typing import Self

import anyio
import anyio.abc
import structlog

from runtime.clock import now as clock_now
from runtime.metrics import Histogram, MetricsRegistry
from sandboxes._errors import SandboxInfraError
from sandboxes._pool_lease import Lease
from sandboxes._pool_parts import (
    DockerReaper,
    PoolExhaustedError,
    PoolReaper,
    PoolStatistics,
    StartGate,
    is_validating,
)
from sandboxes._pool_upkeep import Upkeep
from sandboxes._protocol import Sandbox

__all__ = [
    "DockerReaper",
    "Lease",
    "PoolExhaustedError",
    "PoolReaper",
    "PoolStatistics",
    "SandboxPool",
]

_log = structlog.get_logger("roost.pool")

Prepare = Callable[[Sandbox], Awaitable[None]]

# Longer than `_reaper.REAP_DEADLINE_S`, so the docker reaper's own deadline fires first and
# names the containers it left; this one bounds any reaper.
REAP_AT_EXIT_TIMEOUT_S = 60.0


class SandboxPool:
    """Warm sandboxes per key (a runtime, or backend + runtime + limits), at most `capacity`.

    :param factory: makes an unstarted sandbox for a key.
    :param capacity: most sandboxes alive at once, busy or idle, over all keys.
    :param max_per_key: most sandboxes alive at once for one key (absent: up to `capacity`).
    :param min_idle: warm sandboxes to keep ready per key (started in the background).
    :param idle_timeout_s: destroy sandboxes idle longer than this (keeping `min_idle`).
    :param max_concurrent_starts: most sandboxes starting at once (absent: no limit).
    :param max_starts_per_s: most starts begun per second (absent: no limit).
    :param prepare: per key, a setup run once on a fresh sandbox; its work directory becomes
        the starting state of every sandbox of that key (re-run per sandbox on backends
        without snapshots).
    :param validate: check each reset sandbox before it is handed out again.
    :param reaper: leftovers removed when the pool opens and when it closes.
    :param reap_timeout: most seconds the reaper may take at exit; what it has not removed by
        then is left (and logged), so a hung daemon cannot hang shutdown.
    """

    def __init__(
        self,
        factory: Callable[[str], Sandbox],
        *,
        capacity: int,
        max_per_key: Mapping[str, int] | None = None,
        min_idle: Mapping[str, int] | None = None,
        idle_timeout_s: float | None = None,
        max_concurrent_starts: int | None = None,
        max_starts_per_s: float | None = None,
        prepare: Mapping[str, Prepare] | None = None,
        validate: bool = True,
        reaper: PoolReaper | None = None,
        start_timeout: float = 60.0,
        reset_timeout: float = 30.0,
        close_timeout: float = 30.0,
        reap_timeout: float = REAP_AT_EXIT_TIMEOUT_S,
        metrics: MetricsRegistry | None = None,
    ) -> None:
        if capacity < 1:
            raise ValueError(f"pool capacity must be at least 1, got {capacity}")
        if idle_timeout_s is not None and not idle_timeout_s > 0:
            raise ValueError(f"idle_timeout_s must be positive, got {idle_timeout_s}")
        self.factory = factory
        self.capacity = capacity
        self.max_per_key = dict(max_per_key or {})
        self.min_idle = {k: v for k, v in (min_idle or {}).items() if v > 0}
        self.idle_timeout_s = idle_timeout_s
        self.prepare = dict(prepare or {})
        self.validate = validate
        self.reaper = reaper
        self.start_timeout = start_timeout
        self.reset_timeout = reset_timeout
        self.close_timeout = close_timeout
        self.reap_timeout = reap_timeout
        self._gate = StartGate(concurrency=max_concurrent_starts, per_second=max_starts_per_s)
        self._alive: dict[str, int] = {}
        self._idle: dict[str, collections.OrderedDict[str, Sandbox]] = {}
        self._idle_since: dict[str, float] = {}
        self._snapshots: dict[str, bytes] = {}
        self._snapshot_locks: dict[str, anyio.Lock] = {}
        self._upkeep = Upkeep(self)
        self._closing = False
        self._total = self._busy = self._resetting = 0
        self._warm_hits = self._cold_starts = self._evictions = self._quarantined = 0
        self._start_failures = self._resets = self._starts = self._destroyed = 0
        self._validation_failures = self._idle_expired = 0
        self._busy_seconds = 0.0
        self._busy_since = 0.0
        self._task_group: anyio.abc.TaskGroup | None = None
        self._maintenance: anyio.CancelScope | None = None
        self._on_idle: list[Callable[[str], object]] = []
        self._settled = anyio.Event()
        self._room = anyio.Event()
        self._wake = anyio.Event()
        self._acquire = (
            metrics.histogram("pool.acquire_s") if metrics else Histogram("pool.acquire_s")
        )
        if metrics is not None:
            self._register_gauges(metrics)

    def _register_gauges(self, metrics: MetricsRegistry) -> None:
        def reader(attribute: str) -> Callable[[], float]:
            return lambda: float(getattr(self, attribute))

        for name in (
            "busy", "total", "warm_hits", "cold_starts", "starts", "resets",
            "destroyed", "validation_failures", "quarantined",
        ):  # fmt: skip
            metrics.gauge(f"pool.{name}", reader(f"_{name}"))
        metrics.gauge("pool.idle", lambda: float(sum(len(v) for v in self._idle.values())))

    async def __aenter__(self) -> Self:
        if self.reaper is not None:
            await self.reaper.at_start()
        self._task_group = anyio.create_task_group()
        await self._task_group.__aenter__()
        self._busy_since = clock_now()
        if self.min_idle or self.idle_timeout_s is not None:
            self._maintenance = anyio.CancelScope()
            self._task_group.start_soon(self._upkeep.run, self._maintenance)
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> bool | None:
        assert self._task_group is not None
        self._closing = True  # a reset still running closes its sandbox instead of idling it
        if self._maintenance is not None:
            self._maintenance.cancel()
        for idle in self._idle.values():
            for sandbox in idle.values():
                self._task_group.start_soon(self._close, sandbox)
            idle.clear()
        try:
            return await self._task_group.__aexit__(exc_type, exc, tb)
        finally:
            self._task_group = None
            if self.reaper is not None:
                await self._reap_at_exit(self.reaper)

    async def _reap_at_exit(self, reaper: PoolReaper) -> None:
        # Shielded, so an exit by error or Ctrl-C still removes this run's leftovers; bounded, so
        # a daemon that hangs cannot hold that exit (shielded, nothing else could end it).
        with anyio.CancelScope(shield=True), anyio.move_on_after(self.reap_timeout) as deadline:
            await reaper.at_exit()
        if deadline.cancelled_caught:
            _log.warning("pool.reap_timed_out", after_s=self.reap_timeout)

    async def settle(self) -> None:
        """Wait until no released sandbox is still being reset."""
        while self._resetting:
            self._settled = anyio.Event()
            await self._settled.wait()

    def on_idle(self, callback: Callable[[str], object]) -> None:
        """Call `callback(key)` whenever a sandbox of `key` becomes idle, or is destroyed (which
        frees room for a new one): either can make `can_lease` true, so a scheduler wakes up."""
        self._on_idle.append(callback)

    # -- leasing --------------------------------------------------------------------------------

    def idle(self, key: str) -> int:
        """Warm sandboxes of `key` ready to lease now."""
        idle = self._idle.get(key)
        return len(idle) if idle else 0

    def can_lease(self, key: str) -> bool:
        """Whether `lease_nowait(key)` would succeed now."""
        if self.idle(key) > 0:
            return True
        if self._alive.get(key, 0) >= self.max_per_key.get(key, self.capacity):
            return False
        return self._total < self.capacity or self._evictable(key)

    def lease_nowait(self, key: str) -> Lease:
        """Lease a warm sandbox of `key`, or a new one (evicting an idle one of another key).

        A warm sandbox that has broken while idle is destroyed, never handed out.

        :raises PoolExhaustedError: nothing idle and no room; see `can_lease`.
        :raises Exception: whatever `factory(key)` raises (`SandboxConfigError` for an unknown
            runtime, say), with no room taken and nothing evicted.
        """
        self._account()
        idle = self._idle.get(key)
        while idle:
            _, sandbox = idle.popitem(last=True)  # the most recently used is the warmest
            self._idle_since.pop(sandbox.id, None)
            if getattr(sandbox, "broken", None) is not None:
                self._quarantined += 1
                self._destroy(key, sandbox)
                continue
            self._busy += 1
            self._warm_hits += 1
            self._wake.set()  # below min_idle now: the maintenance task tops it up
            return Lease(self, key, sandbox, cold=False)
        if self._alive.get(key, 0) >= self.max_per_key.get(key, self.capacity) or (
            self._total >= self.capacity and not self._evictable(key)
        ):
            raise PoolExhaustedError(f"no idle {key!r} sandbox and no room for a new one")
        # Made before any counting or eviction: a factory that raises must cost no room.
        sandbox = self.factory(key)
        if self._total >= self.capacity:
            self._evict_one(key)
        self._total += 1
        self._alive[key] = self._alive.get(key, 0) + 1
        self._busy += 1
        self._cold_starts += 1
        return Lease(self, key, sandbox, cold=True)

    @asynccontextmanager
    async def lease(self, key: str, *, timeout: float = 60.0) -> AsyncIterator[Sandbox]:
        """A ready sandbox of `key` for the body, released when it ends: reset and validated
        for reuse, or quarantined when the body raised an infrastructure error or was cancelled.

        :raises PoolExhaustedError: no room for a sandbox of `key` within `timeout` seconds.
        :raises SandboxInfraError: the sandbox could not start.
        """
        lease: Lease | None = None
        with anyio.move_on_after(timeout):
            while not self.can_lease(key):
                await self._room.wait()
            lease = self.lease_nowait(key)
        if lease is None:
            raise PoolExhaustedError(f"no {key!r} sandbox could be leased within {timeout}s")
        healthy = True
        try:
            yield await lease.ready()
        except (SandboxInfraError, anyio.get_cancelled_exc_class()):
            healthy = False
            raise
        finally:
            lease.release(healthy=healthy)

    def statistics(self) -> PoolStatistics:
        self._account()
        idle = sum(len(v) for v in self._idle.values())
        return PoolStatistics(
            capacity=self.capacity,
            total=self._total,
            busy=self._busy,
            idle=idle,
            starting=self._resetting + self._upkeep.warming,
            warm_hits=self._warm_hits,
            cold_starts=self._cold_starts,
            evictions=self._evictions,
            quarantined=self._quarantined,
            start_failures=self._start_failures,
            resets=self._resets,
            busy_seconds=self._busy_seconds,
            starts=self._starts,
            destroyed=self._destroyed,
            validation_failures=self._validation_failures,
            idle_expired=self._idle_expired,
            acquire_p50_s=self._acquire.percentile(0.5) if self._acquire.count else math.nan,
            acquire_p95_s=self._acquire.percentile(0.95) if self._acquire.count else math.nan,
        )

    # -- internals ------------------------------------------------------------------------------

    def _account(self) -> None:
        # Integrate busy sandboxes over time, for utilization.
        now = clock_now()
        self._busy_seconds += self._busy * (now - self._busy_since)
        self._busy_since = now

    def _evictable(self, key: str) -> bool:
        return any(idle for other, idle in self._idle.items() if other != key)

    def _evict_one(self, key: str) -> bool:
        # The least recently used idle sandbox of the key with the most idle ones.
        victims = [
            (len(idle), other) for other, idle in self._idle.items() if other != key and idle
        ]
        if not victims:
            return False
        _, other = max(victims)
        _, sandbox = self._idle[other].popitem(last=False)
        self._idle_since.pop(sandbox.id, None)
        self._evictions += 1
        self._destroy(other, sandbox)
        return True

    async def _bring_up(self, key: str, sandbox: Sandbox) -> None:
        """Start `sandbox` through the start gate, then give it the key's prepared state."""
        async with self._gate.slot():
            with anyio.fail_after(self.start_timeout):
                await sandbox.start()
                self._starts += 1
                await self._prepared(key, sandbox)

    async def _prepared(self, key: str, sandbox: Sandbox) -> None:
        prepare = self.prepare.get(key)
        if prepare is None:
            return
        if not is_validating(sandbox):
            await prepare(sandbox)  # no snapshots here: repeat the setup
            return
        archive = self._snapshots.get(key)
        if archive is None:
            async with self._snapshot_locks.setdefault(key, anyio.Lock()):
                archive = self._snapshots.get(key)
                if archive is None:
                    # The first sandbox of the key prepares; the others start from its files.
                    await prepare(sandbox)
                    archive = self._snapshots[key] = await sandbox.snapshot()
        await sandbox.restore(archive)

    def _give_back(self, lease: Lease, *, healthy: bool) -> None:
        self._account()
        self._busy -= 1
        if healthy and (lease._ready or not lease.cold):  # a warm one is started even unused
            self._resetting += 1
            self._spawn(self._reset_then_idle, lease.key, lease.sandbox)
        else:
            if not healthy:
                self._quarantined += 1
            self._destroy(lease.key, lease.sandbox)

    async def _reset_then_idle(self, key: str, sandbox: Sandbox) -> None:
        problems: list[str] = []
        try:
            with anyio.fail_after(self.reset_timeout):
                await sandbox.reset()
                if is_validating(sandbox):
                    if self.validate:
                        problems = await sandbox.validate()
                elif key in self.prepare:
                    await self.prepare[key](sandbox)
        except (TimeoutError, SandboxInfraError) as exc:
            problems = [f"reset failed: {_describe(exc)}"]
            self._quarantined += 1
        except Exception as exc:
            # Not the infrastructure (a `prepare` that fails, a backend's bug): still only this
            # sandbox is suspect, and the pool's other users must go on.
            _log.error("pool.reset_error", sandbox=sandbox.id, key=key, exc_info=exc)
            problems = [f"reset failed: {_describe(exc)}"]
            self._quarantined += 1
        except BaseException:
            # Cancelled: the pool exits with an error. The sandbox is neither idle nor destroyed,
            # so nothing else would ever close it.
            self._reset_done()
            await self._discard(key, sandbox)
            raise
        else:
            if problems:
                self._validation_failures += 1
        self._reset_done()
        if problems:
            _log.warning("pool.sandbox_destroyed", sandbox=sandbox.id, key=key, why=problems[:5])
            self._destroy(key, sandbox)
            return
        self._resets += 1
        self._make_idle(key, sandbox)

    def _make_idle(self, key: str, sandbox: Sandbox) -> None:
        if self._closing:
            self._destroy(key, sandbox)
            return
        self._idle.setdefault(key, collections.OrderedDict())[sandbox.id] = sandbox
        self._idle_since[sandbox.id] = clock_now()
        self._notify_room()
        for callback in self._on_idle:
            callback(key)

    def _destroy(self, key: str, sandbox: Sandbox) -> None:
        self._forget(key, sandbox)
        self._spawn(self._close, sandbox)

    async def _discard(self, key: str, sandbox: Sandbox) -> None:
        """`_destroy`, closing in the calling task: for a task being cancelled, which must not
        end before its sandbox is closed."""
        self._forget(key, sandbox)
        await self._close(sandbox)

    def _forget(self, key: str, sandbox: Sandbox) -> None:
        self._total -= 1
        self._alive[key] -= 1
        self._destroyed += 1
        self._notify_room()
        self._wake.set()
        for callback in self._on_idle:
            callback(key)

    def _notify_room(self) -> None:
        self._room.set()
        self._room = anyio.Event()

    def _reset_done(self) -> None:
        self._resetting -= 1
        if not self._resetting:
            self._settled.set()

    async def _close(self, sandbox: Sandbox) -> None:
        # Shielded: on an exit by error the pool's tasks are cancelled, and a close cut off leaks
        # the sandbox. A close that fails is logged: the sandbox is gone from the pool anyway.
        with anyio.CancelScope(shield=True), anyio.move_on_after(self.close_timeout) as deadline:
            try:
                await sandbox.close()
            except Exception as exc:
                _log.warning("pool.close_failed", sandbox=sandbox.id, error=_describe(exc))
        if deadline.cancelled_caught:
            _log.warning("pool.close_timed_out", sandbox=sandbox.id, after_s=self.close_timeout)

    def _spawn(self, func: Callable[..., Awaitable[object]], *args: object) -> None:
        if self._task_group is None:
            raise RuntimeError("SandboxPool needs `async with` before use")
        self._task_group.start_soon(func, *args)  # type: ignore[arg-type]


def _describe(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"
