"""`Lease`: one sandbox lent by a `SandboxPool` to one user until released."""

from __future__ import annotations

from typing import TYPE_CHECKING

from runtime.clock import now as clock_now
from sandboxes._errors import SandboxInfraError, SandboxStartError
from sandboxes._protocol import Sandbox

if TYPE_CHECKING:
    from sandboxes.pool import SandboxPool


class Lease:
    """One sandbox lent to one user until `release`. Await `ready()` before using it."""

    __slots__ = ("_pool", "_ready", "_released", "cold", "key", "leased_at", "sandbox")

    def __init__(self, pool: SandboxPool, key: str, sandbox: Sandbox, *, cold: bool) -> None:
        self._pool = pool
        self.key = key
        self.sandbox = sandbox
        self.cold = cold
        self.leased_at = clock_now()
        self._ready = False
        self._released = False

    async def ready(self) -> Sandbox:
        """The sandbox, started (and prepared) if this lease is cold.

        :raises SandboxInfraError: it could not start in time (the lease is then released).
        """
        if not self._ready:
            if self.cold:
                try:
                    await self._pool._bring_up(self.key, self.sandbox)
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
            self._pool._acquire.record(clock_now() - self.leased_at)
        return self.sandbox

    def release(self, *, healthy: bool = True) -> None:
        """Give the sandbox back: reset for reuse when `healthy`, else destroyed. Idempotent."""
        if not self._released:
            self._released = True
            self._pool._give_back(self, healthy=healthy)
