"""Timers that deliver a message to an actor later, once or periodically.

Guarantee: once `Timer.cancel()` has returned, the timer delivers nothing more. The check of the
cancelled flag and the delivery happen with no await in between on the fast path, and a
delivery waiting on a full mailbox is withdrawn by the cancellation before it is accepted.
"""

from __future__ import annotations

from typing import Any

import anyio
import anyio.abc

from runtime.errors import ActorStoppedError
from runtime.ref import ActorRef

__all__ = ["Timer", "send_after", "send_periodic"]


class Timer:
    """A handle on a pending delivery; `cancel()` stops it for good."""

    __slots__ = ("_scope", "cancelled", "deliveries", "finished")

    def __init__(self) -> None:
        self._scope = anyio.CancelScope()
        self.cancelled = False
        self.finished = False
        self.deliveries = 0

    def cancel(self) -> None:
        self.cancelled = True
        self._scope.cancel()

    async def _deliver(self, ref: ActorRef, message: Any) -> bool:
        if self.cancelled:
            return False
        try:
            await ref.tell(message)
        except ActorStoppedError:
            self.cancel()
            return False
        self.deliveries += 1
        return True


def send_after(task_group: anyio.abc.TaskGroup, ref: ActorRef, message: Any, delay: float) -> Timer:
    """Tell `message` to `ref` once, `delay` seconds from now."""
    timer = Timer()

    async def run() -> None:
        with timer._scope:
            await anyio.sleep(delay)
            await timer._deliver(ref, message)
        timer.finished = True

    task_group.start_soon(run, name=f"roost:timer:{ref.name}")
    return timer


def send_periodic(
    task_group: anyio.abc.TaskGroup,
    ref: ActorRef,
    message: Any,
    interval: float,
    *,
    initial_delay: float | None = None,
) -> Timer:
    """Tell `message` to `ref` every `interval` seconds, on a fixed schedule without drift.

    A tick that falls due while the previous delivery still waits on a full mailbox is skipped,
    not queued, so a slow actor is not flooded with stale ticks.
    """
    if interval <= 0:
        raise ValueError(f"send_periodic needs interval > 0, got {interval}")
    timer = Timer()

    async def run() -> None:
        with timer._scope:
            due = anyio.current_time() + (interval if initial_delay is None else initial_delay)
            while True:
                await anyio.sleep(max(0.0, due - anyio.current_time()))
                if not await timer._deliver(ref, message):
                    break  # not return: `finished` below lets the system forget this timer
                now = anyio.current_time()
                due += interval
                if due <= now:  # fell behind: skip the missed ticks
                    due += interval * ((now - due) // interval + 1)
        timer.finished = True

    task_group.start_soon(run, name=f"roost:timer:{ref.name}")
    return timer
