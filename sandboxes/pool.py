"""`SandboxPool`: warm sandboxes per key, leased without waiting, started and reset off-path.

The scheduler must never wait on a sandbox, so leasing is split in two: `lease_nowait(key)`
decides at once (a warm sandbox, or a new one that will start; the pool makes room by evicting
the least recently used idle sandbox of another key when it is full), and the worker that got
the lease pays for a cold start by awaiting `Lease.ready()`. Releasing is also immediate: the
reset before reuse (or the destruction of a quarantined sandbox) runs in the pool's own tasks,
and the sandbox returns to the idle set only once its reset succeeded.

Every start, reset and close has a deadline.
"""

from __future__ import annotations

import collections
import dataclasses
from collections.abc import Callable, Mapping
from types import TracebackType
from typing import Self

import anyio
import anyio.abc
import structlog

from runtime.metrics import MetricsRegistry
from sandboxes._errors import SandboxInfraError, SandboxStartError
from sandboxes._protocol import Sandbox

__all__ = ["Lease", "PoolExhaustedError", "PoolStatistics", "SandboxPool"]

_log = structlog.get_logger("roost.pool")


class PoolExhaustedError(RuntimeError):
    """`lease_nowait` found no idle sandbox and no room to start one; check `can_lease` first."""


@dataclasses.dataclass(frozen=True)
class PoolStatistics:
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


class Lease:
    """One sandbox lent to one user until `release`. Await `ready()` before using it."""

    __slots__ = ("_pool", "_ready", "_released", "cold", "key", "leased_at", "sandbox")

    def __init__(self, pool: SandboxPool, key: str, sandbox: Sandbox, *, cold: bool) -> None:
        self._pool = pool
        self.key = key
        self.sandbox = sandbox
        self.cold = cold
        self.leased_at = anyio.current_time()
        self._ready = not cold
        self._released = False

    async def ready(self) -> Sandbox:
        """The sandbox, started if this lease is cold.

        :raises SandboxInfraError: it could not start in time (the lease is then released).
        """
        if not self._ready:
            try:
                with anyio.fail_after(self._pool.start_timeout):
                    await self.sandbox.start()
            except TimeoutError:
                self.release(healthy=False)
                raise SandboxStartError(
                    f"{self.sandbox.id}: did not start within {self._pool.start_timeout}s"
                ) from None
            except SandboxInfraError:
                self._pool._start_failures += 1
                self.release(healthy=False)
                raise
            self._ready = True
        return self.sandbox

    def release(self, *, healthy: bool = True) -> None:
        """Give the sandbox back: reset for reuse when `healthy`, else destroyed. Idempotent."""
        if not self._released:
            self._released = True
            self._pool._give_back(self, healthy=healthy)


class SandboxPool:
    """Warm sandboxes per key (a runtime, or backend + runtime + limits), at most `capacity`.

    :param factory: makes an unstarted sandbox for a key.
    :param capacity: most sandboxes alive at once, busy or idle, over all keys.
    :param max_per_key: most sandboxes alive at once for one key (absent: up to `capacity`).
    """

    def __init__(
        self,
        factory: Callable[[str], Sandbox],
        *,
        capacity: int,
        max_per_key: Mapping[str, int] | None = None,
        start_timeout: float = 60.0,
        reset_timeout: float = 30.0,
        close_timeout: float = 30.0,
        metrics: MetricsRegistry | None = None,
    ) -> None:
        if capacity < 1:
            raise ValueError(f"pool capacity must be at least 1, got {capacity}")
        self.factory = factory
        self.capacity = capacity
        self.max_per_key = dict(max_per_key or {})
        self._alive: dict[str, int] = {}
        self.start_timeout = start_timeout
        self.reset_timeout = reset_timeout
        self.close_timeout = close_timeout
        self._idle: dict[str, collections.OrderedDict[str, Sandbox]] = {}
        self._total = 0
        self._busy = 0
        self._resetting = 0
        self._warm_hits = 0
        self._cold_starts = 0
        self._evictions = 0
        self._quarantined = 0
        self._start_failures = 0
        self._resets = 0
        self._busy_seconds = 0.0
        self._busy_since = 0.0
        self._task_group: anyio.abc.TaskGroup | None = None
        self._on_idle: list[Callable[[str], object]] = []
        self._settled = anyio.Event()
        if metrics is not None:
            metrics.gauge("pool.busy", lambda: float(self._busy))
            metrics.gauge("pool.total", lambda: float(self._total))

    async def __aenter__(self) -> Self:
        self._task_group = anyio.create_task_group()
        await self._task_group.__aenter__()
        self._busy_since = anyio.current_time()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> bool | None:
        assert self._task_group is not None
        for idle in self._idle.values():
            for sandbox in idle.values():
                self._task_group.start_soon(self._close, sandbox)
            idle.clear()
        result = await self._task_group.__aexit__(exc_type, exc, tb)
        self._task_group = None
        return result

    async def settle(self) -> None:
        """Wait until no released sandbox is still being reset."""
        while self._resetting:
            self._settled = anyio.Event()
            await self._settled.wait()

    def on_idle(self, callback: Callable[[str], object]) -> None:
        """Call `callback(key)` whenever a sandbox of `key` becomes idle (a scheduler wakes up)."""
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

        :raises PoolExhaustedError: nothing idle and no room; see `can_lease`.
        """
        self._account()
        idle = self._idle.get(key)
        if idle:
            _, sandbox = idle.popitem(last=True)  # the most recently used is the warmest
            self._busy += 1
            self._warm_hits += 1
            return Lease(self, key, sandbox, cold=False)
        if self._alive.get(key, 0) >= self.max_per_key.get(key, self.capacity) or (
            self._total >= self.capacity and not self._evict_one(key)
        ):
            raise PoolExhaustedError(f"no idle {key!r} sandbox and no room for a new one")
        self._total += 1
        self._alive[key] = self._alive.get(key, 0) + 1
        self._busy += 1
        self._cold_starts += 1
        return Lease(self, key, self.factory(key), cold=True)

    def statistics(self) -> PoolStatistics:
        self._account()
        idle = sum(len(v) for v in self._idle.values())
        return PoolStatistics(
            capacity=self.capacity,
            total=self._total,
            busy=self._busy,
            idle=idle,
            starting=self._resetting,
            warm_hits=self._warm_hits,
            cold_starts=self._cold_starts,
            evictions=self._evictions,
            quarantined=self._quarantined,
            start_failures=self._start_failures,
            resets=self._resets,
            busy_seconds=self._busy_seconds,
        )

    # -- internals ------------------------------------------------------------------------------

    def _account(self) -> None:
        # Integrate busy sandboxes over time, for utilization.
        now = anyio.current_time()
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
        self._evictions += 1
        self._forget(other)
        self._spawn(self._close, sandbox)
        return True

    def _give_back(self, lease: Lease, *, healthy: bool) -> None:
        self._account()
        self._busy -= 1
        if healthy and lease._ready:
            self._resetting += 1
            self._spawn(self._reset_then_idle, lease.key, lease.sandbox)
        else:
            if not healthy:
                self._quarantined += 1
            self._forget(lease.key)
            self._spawn(self._close, lease.sandbox)

    async def _reset_then_idle(self, key: str, sandbox: Sandbox) -> None:
        try:
            with anyio.fail_after(self.reset_timeout):
                await sandbox.reset()
        except (TimeoutError, SandboxInfraError) as exc:
            _log.warning("sandbox_reset_failed", sandbox=sandbox.id, error=str(exc))
            self._reset_done()
            self._forget(key)
            self._quarantined += 1
            await self._close(sandbox)
            return
        self._reset_done()
        self._resets += 1
        self._idle.setdefault(key, collections.OrderedDict())[sandbox.id] = sandbox
        for callback in self._on_idle:
            callback(key)

    def _forget(self, key: str) -> None:
        self._total -= 1
        self._alive[key] -= 1

    def _reset_done(self) -> None:
        self._resetting -= 1
        if not self._resetting:
            self._settled.set()

    async def _close(self, sandbox: Sandbox) -> None:
        with anyio.move_on_after(self.close_timeout):
            await sandbox.close()

    def _spawn(self, func: Callable[..., object], *args: object) -> None:
        if self._task_group is None:
            raise RuntimeError("SandboxPool needs `async with` before use")
        self._task_group.start_soon(func, *args)  # type: ignore[arg-type]
