"""Reply slots for `ask`, and the coarse deadline wheel that expires them.

An ask puts an `AskEnvelope` (message + reply slot) in the mailbox and waits on the slot. On
asyncio the slot is a plain `asyncio.Future`; a per-ask timer (`loop.call_at`) or cancel scope
would cost more than the round trip itself, so deadlines are grouped into 1 ms buckets that share
one timer, and a finished ask just leaves its bucket. Elsewhere (trio) the slot is an event and
the deadline an ordinary `anyio.fail_after`.
"""

from __future__ import annotations

import asyncio
import math
from typing import Any, Protocol

import anyio
import msgspec

__all__ = ["AskEnvelope", "DeadlineWheel", "EventReply", "Expired", "ReplySlot"]


class ReplySlot(Protocol):
    """Where a handler's answer goes: `asyncio.Future` satisfies this, as does `EventReply`."""

    def done(self) -> bool: ...
    def set_result(self, result: Any, /) -> None: ...
    def set_exception(self, exception: BaseException, /) -> None: ...


class AskEnvelope(msgspec.Struct):
    """An ask in the mailbox: the message and the slot its reply goes to.

    A Struct because it is built in C: a Python `__init__` was a visible share of an ask.
    """

    message: Any
    reply: ReplySlot


class Expired(Exception):
    """Internal: put in a slot whose deadline passed; the asker turns it into AskTimeoutError."""


class EventReply:
    """A reply slot for backends without asyncio futures."""

    __slots__ = ("_done", "error", "event", "result")

    def __init__(self) -> None:
        self.event = anyio.Event()
        self.result: Any = None
        self.error: BaseException | None = None
        self._done = False

    def done(self) -> bool:
        return self._done

    def set_result(self, result: Any, /) -> None:
        if not self._done:
            self._done, self.result = True, result
            self.event.set()

    def set_exception(self, exception: BaseException, /) -> None:
        if not self._done:
            self._done, self.error = True, exception
            self.event.set()

    def abandon(self) -> None:
        """The asker gave up: later answers are dropped."""
        self._done = True


class DeadlineWheel:
    """Expires asyncio futures at (deadline rounded up to `resolution`), one timer per bucket."""

    def __init__(self, *, resolution: float = 0.001) -> None:
        self._resolution = resolution
        self._buckets: dict[int, set[asyncio.Future[Any]]] = {}

    def add(
        self, loop: asyncio.AbstractEventLoop, future: asyncio.Future[Any], timeout: float
    ) -> set[asyncio.Future[Any]]:
        """Expire `future` after at least `timeout` seconds; returns the bucket to leave later.

        `math.inf` never expires it (and `-math.inf` at once).

        :raises ValueError: `timeout` is NaN or not a number.
        """
        try:
            key = math.ceil((loop.time() + timeout) / self._resolution)
        except OverflowError:  # infinite: +inf never expires, -inf is due at once
            if timeout > 0:
                return set()
            key = math.ceil(loop.time() / self._resolution)
        except (TypeError, ValueError):  # checked only here, off the hot path
            raise ValueError(f"ask timeout must be a number of seconds, got {timeout!r}") from None
        bucket = self._buckets.get(key)
        if bucket is None:
            bucket = self._buckets[key] = set()
            loop.call_at(key * self._resolution, self._expire, key)
        bucket.add(future)
        return bucket

    def pending(self) -> int:
        """Futures still waiting for a reply (each leaves its bucket when it completes)."""
        return sum(len(bucket) for bucket in self._buckets.values())

    def _expire(self, key: int) -> None:
        for future in self._buckets.pop(key, ()):
            if not future.done():
                future.set_exception(Expired())
