"""The watchdog: reports any actor stuck in one handler longer than its budget, with the stack.

It costs the hot path nothing. Every `interval` it looks at what each actor is handling (the
message object and the count of messages handled so far); the same message still in hand since
an earlier look means the handler has been running at least that long. Past the budget it logs
`actor_stuck` once per message, with the actor, the message type, the seconds and the stack of
the actor's task, counts it, and keeps the report.
"""

from __future__ import annotations

import dataclasses
import traceback
from typing import TYPE_CHECKING

import anyio
import structlog

from runtime._reply import AskEnvelope

if TYPE_CHECKING:
    from runtime.system import ActorSystem

__all__ = ["StuckHandler", "watch_handlers"]

_log = structlog.get_logger("roost.watchdog")


@dataclasses.dataclass(frozen=True)
class StuckHandler:
    actor: str
    message_type: str
    seconds: float
    stack: str


async def watch_handlers(
    system: ActorSystem, *, budget: float, interval: float, reports: list[StuckHandler]
) -> None:
    """Run until cancelled; append a `StuckHandler` to `reports` for each overrun."""
    stuck_total = system.metrics.counter("stuck_handlers_total")
    seen: dict[str, tuple[int, int, float]] = {}  # actor -> (message id, handled, first seen)
    reported: set[tuple[str, int, int]] = set()
    while True:
        await anyio.sleep(interval)
        now = anyio.current_time()
        for cell in system._cells_snapshot():
            item = cell.current
            if item is None:
                seen.pop(cell.name, None)
                continue
            mark = (id(item), cell.handled.value)
            first = seen.get(cell.name)
            if first is None or first[:2] != mark:
                seen[cell.name] = (*mark, now)
                continue
            limit = getattr(cell.actor_type, "handler_budget_s", None) or budget
            running = now - first[2]
            key = (cell.name, *mark)
            if running < limit or key in reported:
                continue
            reported.add(key)
            message = item.message if type(item) is AskEnvelope else item
            report = StuckHandler(cell.name, type(message).__name__, running, _stack(cell.task))
            reports.append(report)
            stuck_total.inc()
            _log.warning(
                "actor_stuck",
                actor=report.actor,
                msg_type=report.message_type,
                seconds=round(running, 3),
                stack=report.stack,
            )


def _stack(task: object) -> str:
    """The await chain of a suspended task, outermost first, down to where it waits.

    `Task.print_stack` shows only the outermost frame of a suspended task; following
    `cr_await` reaches the handler and whatever it is stuck on.
    """
    get_coro = getattr(task, "get_coro", None)
    if get_coro is None:
        return "(no stack: not an asyncio task)"
    frames = []
    coro = get_coro()
    while coro is not None:
        frame = getattr(coro, "cr_frame", None) or getattr(coro, "gi_frame", None)
        if frame is not None:
            frames.append((frame, frame.f_lineno))
        coro = getattr(coro, "cr_await", None) or getattr(coro, "gi_yieldfrom", None)
    return "".join(traceback.StackSummary.extract(frames).format())
