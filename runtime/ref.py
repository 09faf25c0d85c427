"""`ActorRef`: the only way to talk to an actor.

`tell` is fire-and-forget with backpressure: it returns as soon as the message is in the
mailbox, and waits only while the mailbox is full. `try_tell` never waits. `ask` is
request/reply: the handler's return value comes back, within a deadline.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

import anyio

from runtime._reply import AskEnvelope, EventReply, Expired
from runtime.errors import ActorStoppedError, AskTimeoutError

if TYPE_CHECKING:
    from runtime._cell import ActorCell

__all__ = ["ActorRef"]


class ActorRef:
    """A handle on a spawned actor; valid across its restarts, cheap to copy and share."""

    __slots__ = ("_cell", "_send", "_wake", "_wheel")

    def __init__(self, cell: ActorCell) -> None:
        self._cell = cell
        self._send = cell.send_stream
        self._wake = cell.wake
        self._wheel = cell.system.deadline_wheel

    @property
    def name(self) -> str:
        return self._cell.name

    def __repr__(self) -> str:
        return f"ActorRef({self._cell.name!r})"

    async def tell(self, message: Any) -> None:
        """Put `message` in the mailbox, waiting while it is full (backpressure).

        Messages from one sender arrive in the order they were told.

        :raises ActorStoppedError: the mailbox is closed (the actor is stopping or stopped).
        """
        try:
            self._send.send_nowait(message)
        except anyio.WouldBlock:
            try:
                await self._send.send(message)
            except (anyio.ClosedResourceError, anyio.BrokenResourceError):
                raise ActorStoppedError(f"{self._cell.name} is stopped") from None
        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
            raise ActorStoppedError(f"{self._cell.name} is stopped") from None
        self._wake()

    def try_tell(self, message: Any) -> bool:
        """Put `message` in the mailbox if there is room now; never waits.

        Returns False, and does not deliver, when the mailbox is full or closed.
        """
        try:
            self._send.send_nowait(message)
        except (anyio.WouldBlock, anyio.ClosedResourceError, anyio.BrokenResourceError):
            return False
        self._wake()
        return True

    async def ask(self, message: Any, *, timeout: float) -> Any:
        """Send `message` and wait for the handler's return value.

        The deadline covers waiting for mailbox room, the queue, and the handler. When it passes
        nothing is left pending: the reply slot is abandoned and, if the actor has not started
        on the message yet, it skips it.

        :raises AskTimeoutError: no reply within `timeout` seconds.
        :raises ActorStoppedError: the actor stopped before answering.
        :raises ActorCrashedError: the handler raised; the original error is the cause.
        :raises UnhandledMessageError: the actor has no handler for this message type.
        :raises ValueError: `timeout` is not a number of seconds (`math.inf`: no deadline).
        """
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return await self._ask_with_event(message, timeout)
        future: asyncio.Future[Any] = loop.create_future()
        envelope = AskEnvelope(message, future)
        # The deadline first: a timeout it cannot use fails the ask before anything is sent.
        bucket = self._wheel.add(loop, future, timeout)
        try:
            self._send.send_nowait(envelope)
        except anyio.WouldBlock:
            bucket.discard(future)
            return await self._ask_slowly(envelope, future, timeout)
        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
            bucket.discard(future)
            raise ActorStoppedError(f"{self._cell.name} is stopped") from None
        self._wake()
        try:
            return await future
        except Expired:
            raise self._timeout_error(message, timeout) from None
        finally:
            bucket.discard(future)

    async def _ask_slowly(
        self, envelope: AskEnvelope, future: asyncio.Future[Any], timeout: float
    ) -> Any:
        # The mailbox is full: waiting for room is rare, so an ordinary cancel scope is fine.
        try:
            with anyio.fail_after(timeout):
                await self.tell(envelope)
                return await future
        except TimeoutError:
            future.cancel()
            raise self._timeout_error(envelope.message, timeout) from None

    async def _ask_with_event(self, message: Any, timeout: float) -> Any:
        reply = EventReply()
        try:
            with anyio.fail_after(timeout):
                await self.tell(AskEnvelope(message, reply))
                await reply.event.wait()
        except TimeoutError:
            raise self._timeout_error(message, timeout) from None
        finally:
            # Timed out or cancelled: the actor skips it (as a cancelled future is on asyncio).
            # After an answer this changes nothing.
            reply.abandon()
        if reply.error is not None:
            raise reply.error
        return reply.result

    def _timeout_error(self, message: Any, timeout: float) -> AskTimeoutError:
        return AskTimeoutError(
            f"{self._cell.name} did not answer {type(message).__name__} within {timeout}s"
        )
