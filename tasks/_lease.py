"""`lease_within`: a sandbox from a `SandboxPool`, waiting (up to a deadline) for one to free up.

The pool leases without waiting by design (the scheduler must never block on it); a batch job
or the evaluator may wait, so this waits for the pool's idle callback instead of polling.
"""

from __future__ import annotations

import weakref

import anyio

from sandboxes._errors import SandboxStartError
from sandboxes.pool import Lease, SandboxPool

__all__ = ["lease_within"]

RECHECK_S = 0.5  # a quarantined sandbox frees room without an idle callback: look again

_wakers: weakref.WeakKeyDictionary[SandboxPool, list[anyio.Event]] = weakref.WeakKeyDictionary()


def _waiters(pool: SandboxPool) -> list[anyio.Event]:
    waiters = _wakers.get(pool)
    if waiters is None:
        waiters = _wakers[pool] = []

        def wake(_key: str) -> None:
            while waiters:
                waiters.pop().set()

        pool.on_idle(wake)
    return waiters


async def lease_within(pool: SandboxPool, key: str, timeout: float) -> Lease:
    """A lease of `key` (cold or warm; await `ready()` next).

    :raises SandboxStartError: no sandbox of `key` could be leased within `timeout` seconds.
    """
    waiters = _waiters(pool)
    with anyio.move_on_after(timeout):
        while not pool.can_lease(key):
            waiter = anyio.Event()
            waiters.append(waiter)
            with anyio.move_on_after(RECHECK_S):
                await waiter.wait()
        return pool.lease_nowait(key)
    raise SandboxStartError(f"no {key!r} sandbox could be leased within {timeout}s")
