"""The pool's upkeep task: keep `min_idle` warm sandboxes per key, destroy idle ones past
`idle_timeout_s`. Runs only when either is configured; woken by the pool whenever a lease, a
destroy or an idle sandbox changes what is needed."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import anyio
import structlog

if TYPE_CHECKING:
    from sandboxes._protocol import Sandbox
    from sandboxes.pool import SandboxPool

_log = structlog.get_logger("roost.pool")

RETRY_AFTER_FAILED_START_S = 1.0


class Upkeep:
    def __init__(self, pool: SandboxPool) -> None:
        self.pool = pool
        self.warming = 0
        self._warming_keys: dict[str, int] = {}

    async def run(self, scope: anyio.CancelScope) -> None:
        pool = self.pool
        interval = pool.idle_timeout_s / 2 if pool.idle_timeout_s is not None else math.inf
        with scope:
            while True:
                pool._wake = anyio.Event()
                self.expire_idle()
                self.top_up()
                with anyio.move_on_after(interval):
                    await pool._wake.wait()

    def top_up(self) -> None:
        pool = self.pool
        for key, want in pool.min_idle.items():
            while (
                pool.idle(key) + self._warming_keys.get(key, 0) < want
                and pool._total < pool.capacity
                and pool._alive.get(key, 0) < pool.max_per_key.get(key, pool.capacity)
            ):
                try:
                    # Made before counting: a factory that raises must cost no room.
                    sandbox = pool.factory(key)
                except Exception as exc:
                    # An invalid key, say: retrying now would fail alike, so wait for a wake-up.
                    _log.error("pool.factory_failed", key=key, exc_info=exc)
                    pool._start_failures += 1
                    break
                pool._total += 1
                pool._alive[key] = pool._alive.get(key, 0) + 1
                self.warming += 1
                self._warming_keys[key] = self._warming_keys.get(key, 0) + 1
                pool._spawn(self._warm_one, key, sandbox)

    async def _warm_one(self, key: str, sandbox: Sandbox) -> None:
        pool = self.pool
        try:
            await pool._bring_up(key, sandbox)
        except Exception as exc:
            # Infrastructure or not (a `prepare` that fails), only this sandbox is lost.
            _log.warning("pool.warm_start_failed", key=key, error=f"{type(exc).__name__}: {exc}")
            pool._start_failures += 1
            self._warmed(key)
            pool._destroy(key, sandbox)
            # Do not retry in a tight loop against a backend that is down.
            await anyio.sleep(RETRY_AFTER_FAILED_START_S)
            pool._wake.set()
            return
        except BaseException:
            # Cancelled mid-start (the pool exits with an error): close what may have started.
            self._warmed(key)
            await pool._discard(key, sandbox)
            raise
        self._warmed(key)
        pool._make_idle(key, sandbox)

    def _warmed(self, key: str) -> None:
        self.warming -= 1
        self._warming_keys[key] -= 1

    def expire_idle(self) -> None:
        pool = self.pool
        if pool.idle_timeout_s is None:
            return
        cutoff = anyio.current_time() - pool.idle_timeout_s
        for key, idle in pool._idle.items():
            keep = pool.min_idle.get(key, 0)
            while len(idle) > keep:
                oldest_id, oldest = next(iter(idle.items()))
                if pool._idle_since.get(oldest_id, math.inf) > cutoff:
                    break
                idle.popitem(last=False)
                pool._idle_since.pop(oldest_id, None)
                pool._idle_expired += 1
                pool._destroy(key, oldest)
