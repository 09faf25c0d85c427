"""Supervision: restart what crashed, as configured, and give up upwards when it keeps crashing.

A `Supervisor` runs its children (actor cells or other supervisors) in one task group and
watches how each run ends:

- strategy `ONE_FOR_ONE` restarts only the child that exited; `ONE_FOR_ALL` also restarts
  every sibling (they are interrupted, their current message dead-lettered).
- restart type `PERMANENT` children are restarted after any exit, `TRANSIENT` ones only after a
  crash, `TEMPORARY` ones never.
- intensity: more than `max_restarts` restarts within `within` seconds (on the system clock, so
  virtual time counts under simulation) and the supervisor stops all its children and fails
  with `EscalationError`, which its own parent handles like any crash. At the root, the error
  ends the `ActorSystem`.
"""

from __future__ import annotations

import collections
import enum
from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

import anyio
import structlog

from runtime._cell import ActorCell, Exit, Restart
from runtime.actor import Actor
from runtime.errors import EscalationError

if TYPE_CHECKING:
    from runtime.ref import ActorRef
    from runtime.system import ActorSystem

__all__ = ["Strategy", "Supervisor"]

_log = structlog.get_logger("roost.supervision")


class Strategy(enum.Enum):
    """Which children a supervisor restarts when one of them exits."""

    ONE_FOR_ONE = "one_for_one"
    ONE_FOR_ALL = "one_for_all"


class _Child(Protocol):
    name: str
    restart: Restart
    restarts: int
    stopped: anyio.Event

    async def run_once(self) -> Exit: ...
    def interrupt(self) -> None: ...
    def finished(self) -> bool: ...
    def retire(self) -> None: ...


class Supervisor:
    """A node of the supervision tree. Make one with `ActorSystem.supervisor` or `.supervisor`."""

    def __init__(
        self,
        system: ActorSystem,
        name: str,
        *,
        strategy: Strategy = Strategy.ONE_FOR_ONE,
        max_restarts: int = 3,
        within: float = 5.0,
        restart: Restart = Restart.PERMANENT,
    ) -> None:
        if max_restarts < 0 or within <= 0:
            raise ValueError(f"supervisor {name!r}: need max_restarts >= 0 and within > 0")
        self.system = system
        self.name = name
        self.strategy = strategy
        self.max_restarts = max_restarts
        self.within = within
        self.restart = restart
        self.restarts = 0
        self.stopped = anyio.Event()
        self._children: list[_Child] = []
        self._recent_restarts: collections.deque[float] = collections.deque()
        self._task_group: anyio.abc.TaskGroup | None = None
        self._closing = anyio.Event()
        self._escalation: EscalationError | None = None
        self._interrupted = False

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
        """Start an actor under this supervisor; its mailbox exists (and accepts) at once.

        With `keep_state`, a crash resumes the same instance (state kept, the message being
        handled dead-lettered) instead of making a fresh one: for actors whose state is the
        run's bookkeeping and whose handlers leave it consistent when they raise. With
        `redeliver=N`, the message being handled at a crash is handed to the restarted actor
        again, up to N times in a row, before it goes to the dead letters (at-least-once: for
        idempotent handlers).

        :raises RuntimeError: this supervisor is closed or stopped (nothing would run the actor).
        """
        self.system._check_name_free(name)
        self._check_running()
        cell = ActorCell(
            self.system,
            name,
            factory,
            mailbox_size=mailbox_size,
            restart=restart,
            keep_state=keep_state,
            redeliver=redeliver,
        )
        self.system._register(cell)
        self._adopt(_CellChild(cell))
        return cell.ref

    def supervisor(
        self,
        name: str,
        *,
        strategy: Strategy = Strategy.ONE_FOR_ONE,
        max_restarts: int = 3,
        within: float = 5.0,
        restart: Restart = Restart.PERMANENT,
    ) -> Supervisor:
        """Start a child supervisor; its escalations come to this one.

        :raises RuntimeError: this supervisor is closed or stopped.
        """
        self._check_running()
        child = Supervisor(
            self.system,
            name,
            strategy=strategy,
            max_restarts=max_restarts,
            within=within,
            restart=restart,
        )
        self.system._supervisors.append(child)
        self._adopt(child)
        return child

    def _check_running(self) -> None:
        # A stopped supervisor never runs its task group again: a child adopted now would
        # accept mail that nothing serves, and its senders would wait forever.
        if self._closing.is_set() or self.stopped.is_set():
            raise RuntimeError(f"supervisor {self.name!r} is stopped; it starts no children")

    def _adopt(self, child: _Child) -> None:
        self._children.append(child)
        if self._task_group is not None:
            self._task_group.start_soon(self._supervise, child, name=f"roost:{child.name}")

    # -- as a child of its parent -------------------------------------------------------------

    async def run_once(self) -> Exit:
        """Run every child until this supervisor is closed (NORMAL) or escalates (CRASHED)."""
        self._escalation = None
        self._interrupted = False
        self._recent_restarts.clear()
        async with anyio.create_task_group() as task_group:
            self._task_group = task_group
            for child in list(self._children):
                task_group.start_soon(self._supervise, child, name=f"roost:{child.name}")
            await self._closing.wait()
            task_group.cancel_scope.cancel()
        self._task_group = None
        if self._closing.is_set():
            # Closed while the system runs on: the children cancelled with it stop for good.
            self._retire_children()
        if self._escalation is not None:
            return Exit.CRASHED
        return Exit.INTERRUPTED if self._interrupted else Exit.NORMAL

    def interrupt(self) -> None:
        if self._task_group is not None:
            self._interrupted = True
            self._task_group.cancel_scope.cancel()

    def finished(self) -> bool:
        return self._closing.is_set()

    def retire(self) -> None:
        # Not run again, so neither are its children, or sends to them would wait on nothing.
        self._retire_children()
        self.stopped.set()

    def _retire_children(self) -> None:
        """Stop every child for good: mailboxes dead-lettered, names free for new actors."""
        for child in self._children:
            child.retire()
        self._children.clear()

    def close(self) -> None:
        """Stop supervising: children are cancelled; used once they have drained."""
        self._closing.set()

    @property
    def escalation(self) -> EscalationError | None:
        return self._escalation

    # -- supervising ----------------------------------------------------------------------------

    async def _supervise(self, child: _Child) -> None:
        while True:
            exit = await child.run_once()
            if exit is Exit.INTERRUPTED:
                continue
            if exit is Exit.NORMAL and (child.finished() or child.restart is not Restart.PERMANENT):
                break
            if exit is Exit.CRASHED and child.restart is Restart.TEMPORARY:
                break
            if not self._may_restart():
                self._escalate(child)
                return
            child.restarts += 1
            _log.info("restarting", supervisor=self.name, child=child.name, after=exit.value)
            if self.strategy is Strategy.ONE_FOR_ALL:
                for sibling in self._children:
                    if sibling is not child:
                        sibling.interrupt()
        self._children.remove(child)
        child.retire()

    def _may_restart(self) -> bool:
        now = anyio.current_time()
        recent = self._recent_restarts
        while recent and recent[0] <= now - self.within:
            recent.popleft()
        if len(recent) >= self.max_restarts:
            return False
        recent.append(now)
        return True

    def _escalate(self, child: _Child) -> None:
        self._escalation = EscalationError(
            f"supervisor {self.name!r} gave up: {child.name!r} needed more than "
            f"{self.max_restarts} restarts within {self.within}s"
        )
        _log.error("supervisor_escalating", supervisor=self.name, child=child.name)
        if self._task_group is not None:
            self._task_group.cancel_scope.cancel()


class _CellChild:
    """Adapts an `ActorCell` to the child protocol the supervisor drives."""

    def __init__(self, cell: ActorCell) -> None:
        self.cell = cell
        self.name = cell.name
        self.restart = cell.restart
        self.stopped = cell.stopped

    @property
    def restarts(self) -> int:
        return self.cell.restarts

    @restarts.setter
    def restarts(self, value: int) -> None:
        self.cell.restarts = value

    async def run_once(self) -> Exit:
        return await self.cell.run_once()

    def interrupt(self) -> None:
        self.cell.interrupt()

    def finished(self) -> bool:
        return self.cell.closed

    def retire(self) -> None:
        # Not restarted again: whatever is still queued will never be handled.
        self.cell.system._retire_mailbox(self.cell)
        self.cell.stopped.set()
