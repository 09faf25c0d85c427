"""The actor cell: a mailbox that outlives crashes, and the loop that serves it.

A cell is created once per spawned actor and owns the mailbox (a bounded anyio memory object
stream). Each (re)start makes a fresh actor instance from the factory and serves the same
mailbox, so `ActorRef`s stay valid and queued messages survive a restart; only the message being
handled when the actor crashed is lost, and it goes to the dead-letter office, unless the actor
was spawned with `redeliver=N`: then the restarted instance is handed that message again, up to
N times in a row (at-least-once delivery, for actors whose handlers are idempotent), and only a
message that crashes it N + 1 times goes to the dead letters.
"""

from __future__ import annotations

import asyncio
import contextvars
import enum
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import anyio
import structlog
from anyio.lowlevel import checkpoint

from runtime._reply import AskEnvelope
from runtime.actor import Actor
from runtime.errors import ActorCrashedError, ActorStoppedError, UnhandledMessageError
from runtime.faults import InjectedCrash

if TYPE_CHECKING:
    from runtime.system import ActorSystem

_log = structlog.get_logger("roost.actor")

#: The cell whose task is running, so log lines can carry the actor and message type.
current_cell: contextvars.ContextVar[ActorCell | None] = contextvars.ContextVar(
    "roost_current_cell", default=None
)

#: Messages served back to back before the loop yields, so a busy actor cannot starve others.
_YIELD_EVERY = 256
#: ... or sooner, once its handlers have run this long without a wait: 256 dispatches of a
#: scheduler at 40 us each held the loop 10 ms in one callback (scripts/probe_loop_lag.py).
#: Checked on the sampled (timed) calls only, so it costs no extra clock reads.
_YIELD_AFTER_S = 0.002
#: Sentinels from `_receive_slowly`: the mailbox is closed and drained / look again.
_END = object()
_NOTHING = object()

#: One handler call in 16 is timed (a power of two, so the test is a mask).
_TIME_MASK = 15


def _running_asyncio_loop() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:  # another anyio backend (trio): use anyio's own waiting
        return None


def _peekable_state(stream: Any) -> Any:
    """anyio's private stream state, if it has the shape the serve loop reads; else None.

    Reading it says "empty" without the raise of `receive_nowait`; when anyio changes that
    shape the loop falls back to the public calls, and a test pins the shape.
    """
    state = getattr(stream, "_state", None)
    shape = ("buffer", "waiting_senders", "open_send_channels")
    if state is None or not all(hasattr(state, name) for name in shape):
        return None
    return state


class Restart(enum.Enum):
    """When a supervisor restarts a child that has exited."""

    PERMANENT = "permanent"  # always (until the system stops)
    TRANSIENT = "transient"  # only after a crash
    TEMPORARY = "temporary"  # never


class Exit(enum.Enum):
    """How one run of an actor instance ended."""

    NORMAL = "normal"  # mailbox closed and drained, or the actor called stop()
    CRASHED = "crashed"  # on_start or a handler raised
    INTERRUPTED = "interrupted"  # its supervisor cancelled it to restart it with its siblings


class ActorCell:
    """Runtime state of one spawned actor: mailbox, counters, and its current instance."""

    def __init__(
        self,
        system: ActorSystem,
        name: str,
        factory: Callable[[], Actor],
        *,
        mailbox_size: int,
        restart: Restart,
        keep_state: bool = False,
        redeliver: int = 0,
    ) -> None:
        from runtime.ref import ActorRef

        if mailbox_size < 1:
            raise ValueError(f"actor {name!r}: mailbox_size must be at least 1")
        self.system = system
        self.name = name
        self.factory = factory
        self.restart = restart
        self.keep_state = keep_state
        self._kept: Actor | None = None  # the crashed instance a keep_state restart resumes
        if redeliver < 0:
            raise ValueError(f"actor {name!r}: redeliver must be >= 0, got {redeliver}")
        self.redeliver = redeliver
        self._redo: Any = None  # a crashed message, served first by the restarted instance
        self._redo_count = 0
        self.redelivered = 0
        self.mailbox_size = mailbox_size
        self.send_stream, self._recv = anyio.create_memory_object_stream[Any](mailbox_size)
        self.ref = ActorRef(self)
        metrics = system.metrics
        self.handled = metrics.counter(f"actor.{name}.handled")
        self.handler_time = metrics.histogram(f"actor.{name}.handler_s")
        # Replaced, not reused: a gauge left by an earlier actor of this name reads its mailbox.
        metrics.remove(f"actor.{name}.mailbox_depth")
        metrics.gauge(f"actor.{name}.mailbox_depth", self.depth)
        self.restarts = 0
        self.expired_asks = 0
        self.closed = False
        self.current: Any = None
        self.stopped = anyio.Event()
        self._scope: anyio.CancelScope | None = None
        self._waiter: asyncio.Future[None] | None = None
        self._peek = _peekable_state(self._recv)
        self.task: asyncio.Task[Any] | None = None  # the running instance's task, for stacks
        self._interrupted = False

    def depth(self) -> float:
        return float(self._recv.statistics().current_buffer_used)

    def close(self) -> None:
        """Accept no more messages; the actor stops once it has handled those already queued."""
        self.closed = True
        self.send_stream.close()
        self.wake()

    def interrupt(self) -> None:
        """Cancel the running instance so its supervisor can restart it (one_for_all)."""
        if self._scope is not None:
            self._interrupted = True
            self._scope.cancel()

    def drain(self, reason: str) -> dict[str, int]:
        """Close the mailbox and dead-letter whatever is still in it; counts by message type."""
        self.close()
        dropped: dict[str, int] = {}
        if self._redo is not None:  # a crashed message the actor will not be restarted to redo
            message = self._bury(self._redo, reason, quiet=True)
            self._redo = None
            dropped[type(message).__name__] = 1
        while True:
            try:
                item = self._recv.receive_nowait()
            except (anyio.WouldBlock, anyio.EndOfStream, anyio.ClosedResourceError):
                # Nothing can be sent any more and nothing is left: release the stream.
                self._recv.close()
                return dropped
            message = self._bury(item, reason, quiet=True)
            name = type(message).__name__
            dropped[name] = dropped.get(name, 0) + 1

    async def run_once(self) -> Exit:
        """Make a fresh instance (or, with `keep_state`, resume the one that crashed) and serve
        the mailbox until it stops, crashes or is interrupted."""
        resumed = self._kept is not None
        instance = self._kept if self._kept is not None else self.factory()
        self._kept = None
        if not resumed:
            self.actor_type: type[Actor] = type(instance)
            instance.ref, instance.name, instance.system = self.ref, self.name, self.system
            instance.log = _log.bind(actor=self.name)
        started = resumed
        token = current_cell.set(self)
        self.task = asyncio.current_task() if _running_asyncio_loop() else None
        self._interrupted = False
        exit = Exit.NORMAL
        try:
            with anyio.CancelScope() as scope:
                self._scope = scope
                try:
                    if not resumed:
                        await instance.on_start()
                        started = True
                    await self._serve(instance)
                except Exception as exc:
                    exit = Exit.CRASHED
                    self._crash(exc)
                except BaseException:
                    self._drop_current("cancelled")
                    raise
            if scope.cancelled_caught and self._interrupted:
                exit = Exit.INTERRUPTED
        finally:
            self._scope = None
            current_cell.reset(token)
            if (
                self.keep_state
                and started
                and exit is Exit.CRASHED
                and self.restart is not Restart.TEMPORARY  # never resumed: stop it now
            ):
                # Resume, not restart: the state and resources stay; only the message being
                # handled is lost (to the dead letters), so on_stop and on_start do not run.
                self._kept = instance
            else:
                await self._stop_instance(instance)
        return exit

    async def stop_kept(self) -> None:
        """Run `on_stop` of a crashed instance kept for a resume that will not come (its
        supervisor gave up), so its resources are released; nothing if none is kept."""
        instance, self._kept = self._kept, None
        if instance is not None:
            await self._stop_instance(instance)

    async def _stop_instance(self, instance: Actor) -> None:
        with anyio.CancelScope(shield=True), anyio.move_on_after(self.system.on_stop_timeout):
            await self._on_stop(instance)

    async def _serve(self, instance: Actor) -> None:
        # The hot loop of the runtime: take without waiting while there is mail, wait only
        # when the mailbox is empty, time one handler call in _TIME_EVERY (a sampled histogram
        # has the same percentiles and costs a sixteenth), and yield every _YIELD_EVERY, or after
        # _YIELD_AFTER_S of handlers run back to back.
        recv = self._recv
        actor_type = type(instance)
        handlers = actor_type._handlers
        record_time = self.handler_time.record
        handled = self.handled
        clock = time.perf_counter
        loop = _running_asyncio_loop()
        peek = self._peek if loop is not None else None
        inject = self.system.fault_injector
        served = 0
        burst_began: float | None = None  # the first timed call since the last wait or yield
        yield_due = False
        try:
            while True:
                if self._redo is not None:
                    item, self._redo = self._redo, None
                elif peek is not None and not peek.waiting_senders:
                    # Fast path on asyncio, reading anyio's stream state directly: with no sender
                    # blocked, receive_nowait() would only pop the buffer, and on an empty one it
                    # raises, and receive() checkpoints and builds an Event per wait. Popping,
                    # and waiting on a bare future that `wake` resolves, costs a fraction.
                    if peek.buffer:
                        item = peek.buffer.popleft()
                    elif peek.open_send_channels:
                        await self._receive_slowly(loop)
                        burst_began = None
                        continue
                    else:
                        return  # closed and drained
                else:
                    try:
                        item = recv.receive_nowait()
                    except anyio.WouldBlock:
                        item = await self._receive_slowly(loop)
                        burst_began = None
                        if item is _NOTHING:
                            continue
                    except anyio.EndOfStream:
                        return
                    if item is _END:
                        return
                self.current = item
                if type(item) is AskEnvelope:
                    reply = item.reply
                    message = item.message
                    if reply.done():  # the asker already timed out or was cancelled
                        self.expired_asks += 1
                        self.current = None
                        continue
                else:
                    reply = None
                    message = item
                spec = handlers.get(type(message)) or actor_type.handler_for(type(message))
                if spec is None:
                    self._unhandled(message, reply)
                    continue
                if inject is not None and inject(self.name, message):
                    raise InjectedCrash(f"{self.name} on {type(message).__name__}")
                if served & _TIME_MASK:
                    result = spec.func(instance, message)
                    if spec.is_async:
                        result = await result
                else:
                    started = clock()
                    result = spec.func(instance, message)
                    if spec.is_async:
                        result = await result
                    ended = clock()
                    record_time(ended - started)
                    if burst_began is None:
                        burst_began = started
                    elif ended - burst_began > _YIELD_AFTER_S:
                        yield_due = True
                served += 1
                self.current = None
                self._redo_count = 0
                if reply is not None and not reply.done():
                    reply.set_result(result)
                if instance._stop_requested:
                    return
                if served == _YIELD_EVERY or yield_due:
                    handled.value += served
                    served = 0
                    burst_began, yield_due = None, False
                    await checkpoint()
        finally:
            handled.value += served

    async def _receive_slowly(self, loop: asyncio.AbstractEventLoop | None) -> Any:
        """Wait for mail on an empty mailbox: the next item, `_END` if closed, or `_NOTHING`
        when woken on asyncio (the caller then looks again)."""
        if loop is None:
            try:
                return await self._recv.receive()
            except anyio.EndOfStream:
                return _END
        self._waiter = waiter = loop.create_future()
        try:
            await waiter
        finally:
            self._waiter = None
        return _NOTHING

    def wake(self) -> None:
        """New mail (or a close): resume the serve loop if it is waiting on an empty mailbox."""
        waiter = self._waiter
        if waiter is not None:
            self._waiter = None
            if not waiter.done():
                waiter.set_result(None)

    def _unhandled(self, message: Any, reply: Any) -> None:
        self.current = None
        name = type(message).__name__
        if reply is not None and not reply.done():
            reply.set_exception(UnhandledMessageError(f"{self.name} has no handler for {name}"))
        self.system.dead_letters.post(self.name, message, "no handler")

    def _crash(self, exc: Exception) -> None:
        item = self.current
        message = item.message if type(item) is AskEnvelope else item
        msg_type = type(message).__name__ if item is not None else None
        if isinstance(exc, InjectedCrash):
            # On purpose, and many of them in a chaos run: one line, not a rendered traceback.
            _log.warning("actor_crashed", actor=self.name, msg_type=msg_type, injected=True)
        else:
            _log.error("actor_crashed", actor=self.name, msg_type=msg_type, exc_info=exc)
        if item is not None and self._redo_count < self.redeliver:
            # At-least-once: the restarted instance is handed the same message again (an ask
            # keeps waiting for its reply). Handlers of such actors must be idempotent.
            self._redo_count += 1
            self.redelivered += 1
            self._redo, self.current = item, None
            return
        self._redo_count = 0
        if item is not None:
            if type(item) is AskEnvelope and not item.reply.done():
                error = ActorCrashedError(f"{self.name} crashed handling {type(message).__name__}")
                error.__cause__ = exc
                item.reply.set_exception(error)
            self.system.dead_letters.post(self.name, message, "crashed")
            self.current = None

    def _drop_current(self, reason: str) -> None:
        if self.current is not None:
            self._bury(self.current, reason)
            self.current = None

    def _bury(self, item: Any, reason: str, *, quiet: bool = False) -> Any:
        message = item
        if type(item) is AskEnvelope:
            message = item.message
            if not item.reply.done():
                item.reply.set_exception(ActorStoppedError(f"{self.name} stopped ({reason})"))
        self.system.dead_letters.post(self.name, message, reason, quiet=quiet)
        return message

    async def _on_stop(self, instance: Actor) -> None:
        try:
            await instance.on_stop()
        except Exception as exc:
            _log.error("actor_on_stop_failed", actor=self.name, exc_info=exc)
