"""`ActorSystem`: spawns actors, names them, supervises them, and stops them cleanly.

    async with ActorSystem() as system:
        counter = system.spawn(Counter, name="counter")
        await counter.tell(Add(amount=2))
        total = await counter.ask(Read(), timeout=1.0)

Leaving the `async with` block stops the system gracefully: timers are cancelled, then actors
are closed in reverse spawn order (producers, spawned last, stop before the consumers they feed)
and each handles every message already accepted into its mailbox. If that takes longer than
`stop_timeout`, the rest is cancelled and every message left behind is dead-lettered and
counted in `stop_report`. A root supervisor that escalates ends the block with
`EscalationError`.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable
from types import TracebackType
from typing import Any

import anyio
import anyio.abc
import structlog

from runtime import timers
from runtime._cell import ActorCell, Restart
from runtime._reply import DeadlineWheel
from runtime.actor import Actor
from runtime.collector import CollectorTuner
from runtime.deadletters import DeadLetterOffice
from runtime.errors import EscalationError
from runtime.faults import CrashInjector
from runtime.metrics import MetricsRegistry
from runtime.monitor import measure_loop_lag, write_metrics_jsonl
from runtime.ref import ActorRef
from runtime.supervision import Strategy, Supervisor
from runtime.watchdog import StuckHandler, watch_handlers

__all__ = ["ActorSystem", "StopReport", "SystemStatistics"]

_log = structlog.get_logger("roost.system")


@dataclasses.dataclass(frozen=True)
class StopReport:
    """What a stop left undone: messages dropped per actor and per message type."""

    graceful: bool
    dropped_by_actor: dict[str, int]
    dropped_by_type: dict[str, int]

    @property
    def dropped(self) -> int:
        return sum(self.dropped_by_actor.values())


@dataclasses.dataclass(frozen=True)
class SystemStatistics:
    """A point-in-time summary of the system."""

    actors: int
    restarts: int
    pending_asks: int
    dead_letters: int
    redelivered: int = 0  # crashed messages handed to the restarted actor again


def _is_leaf(error: BaseException) -> bool:
    return not isinstance(error, BaseExceptionGroup)


def _first_leaf(group: BaseExceptionGroup[BaseException]) -> BaseException:
    first = group.exceptions[0]
    return _first_leaf(first) if isinstance(first, BaseExceptionGroup) else first


class ActorSystem:
    """The lifetime of a group of actors and their supervision tree.

    :param stop_timeout: seconds a graceful stop may take before the rest is cancelled.
    :param on_stop_timeout: seconds each actor's `on_stop` may take.
    :param strategy, max_restarts, within: the root supervisor's policy.
    :param lag_interval: how often to sample event-loop lag (None: do not).
    :param metrics_path: append a JSONL metrics snapshot here every `metrics_interval` seconds.
    :param handler_budget: report (log, count, `stuck_handlers`) any handler running longer;
        an actor class may set its own `handler_budget_s`. None: no watchdog.
    :param gc_freeze_actors: once spawning settles with this many actors (and again each time
        the count doubles), freeze what is alive out of the cyclic collector's reach, so that
        its full collections stop stalling the loop; see `runtime.collector` for the trade-off
        (cyclic garbage among frozen objects waits for the system's exit). None: never.
    """

    def __init__(
        self,
        *,
        stop_timeout: float = 10.0,
        on_stop_timeout: float = 5.0,
        strategy: Strategy = Strategy.ONE_FOR_ONE,
        max_restarts: int = 3,
        within: float = 5.0,
        lag_interval: float | None = 0.1,
        metrics_path: str | os.PathLike[str] | None = None,
        metrics_interval: float = 1.0,
        handler_budget: float | None = None,
        fault_injector: CrashInjector | None = None,
        gc_freeze_actors: int | None = 1000,
    ) -> None:
        self.stop_timeout = stop_timeout
        #: Chaos testing only: consulted before every handler call (see runtime/faults.py).
        self.fault_injector = fault_injector
        self.on_stop_timeout = on_stop_timeout
        self.metrics = MetricsRegistry()
        self.dead_letters = DeadLetterOffice(self.metrics)
        self.stop_report: StopReport | None = None
        self._cells: dict[str, ActorCell] = {}
        self._order: list[ActorCell] = []
        self._root = Supervisor(
            self, "root", strategy=strategy, max_restarts=max_restarts, within=within
        )
        self._supervisors: list[Supervisor] = [self._root]
        self._timers: list[timers.Timer] = []
        self._timer_prune_at = 64
        self.deadline_wheel = DeadlineWheel()
        self._task_group: anyio.abc.TaskGroup | None = None
        self._lag_interval = lag_interval
        self._metrics_path = metrics_path
        self._metrics_interval = metrics_interval
        self._stopping = False
        self._stopped_gracefully = True
        self._dropped_by_actor: dict[str, int] = {}
        self._dropped_by_type: dict[str, int] = {}
        self._background_scopes: list[anyio.CancelScope] = []
        self._root_done = anyio.Event()
        self._handler_budget = handler_budget
        self.collector = CollectorTuner(gc_freeze_actors)
        self.stuck_handlers: list[StuckHandler] = []

    # -- lifetime -------------------------------------------------------------------------------

    async def __aenter__(self) -> ActorSystem:
        self._task_group = anyio.create_task_group()
        await self._task_group.__aenter__()
        self._task_group.start_soon(self._run_root, name="roost:root")
        if self._lag_interval is not None:
            lag = self.metrics.histogram("loop_lag_s")
            self._start_background(measure_loop_lag(lag))
        if self._handler_budget is not None:
            watchdog = watch_handlers(
                self,
                budget=self._handler_budget,
                interval=min(1.0, self._handler_budget / 4),
                reports=self.stuck_handlers,
            )
            self._start_background(watchdog)
        if self._metrics_path is not None:
            writer = write_metrics_jsonl(
                self.metrics, self._metrics_path, interval=self._metrics_interval
            )
            self._start_background(writer)
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> bool | None:
        assert self._task_group is not None
        if exc is None and not self._stopping:
            try:
                await self.stop()
            except BaseException as error:
                # Cancelled mid-stop: by our own task group when a child failed (an escalation
                # while draining), or from outside. The task group must still be exited, or the
                # child's error is lost and its tasks outlive the system.
                self._abort()
                exc_type, exc, tb = type(error), error, error.__traceback__
        else:
            self._abort()
        try:
            return await self._task_group.__aexit__(exc_type, exc, tb)
        except BaseExceptionGroup as group:
            # Surface the error that matters, not anyio's wrapper: an escalation first, else
            # the body's own exception when nothing else went wrong.
            escalations = group.subgroup(EscalationError)
            if escalations is not None:
                raise _first_leaf(escalations) from None
            if exc is not None and group.subgroup(lambda e: _is_leaf(e) and e is not exc) is None:
                raise exc from exc.__cause__
            raise
        finally:
            self.collector.close()
            await self._stop_kept_instances()
            self._finish_report()

    async def stop(self, timeout: float | None = None) -> None:
        """Stop gracefully within `timeout` (default `stop_timeout`), then cancel what is left.

        Returns once every actor has stopped; the outcome is in `stop_report`. Called inside
        the `async with` block, the block goes on (only the system's own tasks end).
        """
        if self._stopping:
            return
        self._stopping = True
        for timer in self._timers:
            timer.cancel()
        with anyio.move_on_after(self.stop_timeout if timeout is None else timeout) as scope:
            for cell in reversed(self._order):
                cell.close()
                await cell.stopped.wait()
        if scope.cancelled_caught:
            self._stopped_gracefully = False
            _log.warning("stop_deadline_passed", timeout=scope.deadline)
        # Not the task group's cancel scope: it also holds the body of the `async with`, which
        # would then end silently at its next await after an explicit stop().
        self._wind_down()
        await self._root_done.wait()
        await self._stop_kept_instances()
        self._finish_report()

    def _wind_down(self) -> None:
        """End the system's own tasks: timers, background work, and (by closing every
        supervisor) whatever actor is still running, cancelled."""
        self._stopping = True
        for timer in self._timers:
            timer.cancel()
        for scope in self._background_scopes:
            scope.cancel()
        for supervisor in self._supervisors:
            supervisor.close()

    def _abort(self) -> None:
        self._wind_down()
        if self._task_group is not None:
            self._task_group.cancel_scope.cancel()

    async def _stop_kept_instances(self) -> None:
        for cell in self._order:
            await cell.stop_kept()

    def _retire_mailbox(self, cell: ActorCell) -> None:
        """Dead-letter what is left for an actor that will not run again; cancelled by a stop
        past its deadline, that is what the stop dropped."""
        if self._stopping and not self._stopped_gracefully:
            self._count_dropped(cell.name, cell.drain("stop deadline"))
        else:
            cell.drain("actor stopped")

    def _count_dropped(self, actor: str, dropped: dict[str, int]) -> None:
        if dropped:
            self._stopped_gracefully = False
            by_actor, by_type = self._dropped_by_actor, self._dropped_by_type
            by_actor[actor] = by_actor.get(actor, 0) + sum(dropped.values())
            for type_name, count in dropped.items():
                by_type[type_name] = by_type.get(type_name, 0) + count

    def _finish_report(self) -> None:
        # Adds to what was counted before: stop() reports, and the exit drains again.
        for cell in self._order:
            self._count_dropped(cell.name, cell.drain("stop deadline"))
        by_actor, by_type = self._dropped_by_actor, self._dropped_by_type
        report = StopReport(self._stopped_gracefully, dict(by_actor), dict(by_type))
        if by_actor and report != self.stop_report:
            _log.warning("stopped_with_dropped_messages", dropped=by_actor, by_type=by_type)
        self.stop_report = report

    async def _run_root(self) -> None:
        try:
            await self._root.run_once()
        finally:
            self._root_done.set()
        if self._root.escalation is not None:
            raise self._root.escalation

    def _start_background(self, work: Any) -> None:
        # A scope made now, so that a stop before the task has even started still ends it.
        scope = anyio.CancelScope()
        self._background_scopes.append(scope)
        assert self._task_group is not None
        self._task_group.start_soon(self._background, work, scope)

    async def _background(self, work: Any, scope: anyio.CancelScope) -> None:
        with scope:
            await work

    # -- actors ---------------------------------------------------------------------------------

    def spawn(
        self,
        factory: Callable[[], Actor],
        *,
        name: str,
        mailbox_size: int = 1024,
        restart: Restart = Restart.PERMANENT,
        keep_state: bool = False,
        redeliver: int = 0,
    ) -> ActorRef:
        """Start an actor under the root supervisor. `factory` makes a fresh instance per start
        (with `keep_state`, only the first: a crash resumes that instance; with `redeliver`,
        the crashed message is handed to it again; see `Supervisor.spawn`).

        :raises ValueError: `name` belongs to a running actor, or `mailbox_size` < 1.
        """
        return self._root.spawn(
            factory,
            name=name,
            mailbox_size=mailbox_size,
            restart=restart,
            keep_state=keep_state,
            redeliver=redeliver,
        )

    def supervisor(
        self,
        name: str,
        *,
        strategy: Strategy = Strategy.ONE_FOR_ONE,
        max_restarts: int = 3,
        within: float = 5.0,
        restart: Restart = Restart.PERMANENT,
    ) -> Supervisor:
        """Start a supervisor under the root; spawn actors on it to group their fate."""
        return self._root.supervisor(
            name, strategy=strategy, max_restarts=max_restarts, within=within, restart=restart
        )

    def lookup(self, name: str) -> ActorRef:
        """The actor registered under `name`.

        :raises KeyError: no actor has that name.
        """
        cell = self._cells.get(name)
        if cell is None:
            raise KeyError(f"no actor named {name!r}")
        return cell.ref

    def _check_name_free(self, name: str) -> None:
        if self._task_group is None or self._stopping:
            raise RuntimeError("spawn needs a running ActorSystem (inside `async with`)")
        existing = self._cells.get(name)
        if existing is not None and not existing.stopped.is_set():
            raise ValueError(f"an actor named {name!r} is already running")

    def _cells_snapshot(self) -> list[ActorCell]:
        return list(self._order)

    def _register(self, cell: ActorCell) -> None:
        self._check_name_free(cell.name)
        self._cells[cell.name] = cell
        self._order.append(cell)
        assert self._task_group is not None  # _check_name_free: the system is running
        self.collector.spawned(len(self._cells), self._task_group)

    # -- time -----------------------------------------------------------------------------------

    def send_after(self, ref: ActorRef, message: Any, delay: float) -> timers.Timer:
        """Tell `message` to `ref` once after `delay` seconds; cancel with `Timer.cancel()`."""
        return self._track(timers.send_after(self._running_group(), ref, message, delay))

    def send_periodic(
        self, ref: ActorRef, message: Any, interval: float, *, initial_delay: float | None = None
    ) -> timers.Timer:
        """Tell `message` to `ref` every `interval` seconds until cancelled."""
        return self._track(
            timers.send_periodic(
                self._running_group(), ref, message, interval, initial_delay=initial_delay
            )
        )

    def _track(self, timer: timers.Timer) -> timers.Timer:
        # Forget finished timers now and then, so a long run of send_after does not pile up.
        if len(self._timers) >= self._timer_prune_at:
            self._timers = [t for t in self._timers if not t.finished]
            self._timer_prune_at = max(64, 2 * len(self._timers))
        self._timers.append(timer)
        return timer

    def _running_group(self) -> anyio.abc.TaskGroup:
        if self._task_group is None or self._stopping:
            raise RuntimeError("timers need a running ActorSystem (inside `async with`)")
        return self._task_group

    # -- inspection -----------------------------------------------------------------------------

    def statistics(self) -> SystemStatistics:
        return SystemStatistics(
            actors=sum(1 for cell in self._cells.values() if not cell.stopped.is_set()),
            restarts=sum(cell.restarts for cell in self._order),
            pending_asks=self.deadline_wheel.pending(),
            dead_letters=self.dead_letters.total,
            redelivered=sum(cell.redelivered for cell in self._order),
        )
