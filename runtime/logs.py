"""structlog configuration: console or JSON lines, with the actor and message type on each line.

Every line logged from inside an actor carries `actor` (its name) and `msg_type` (the message
it is handling), read from the running cell when the line is rendered, so the hot path pays
nothing for it.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import MutableMapping
from typing import Any, Literal

import structlog

from runtime._cell import current_cell
from runtime._reply import AskEnvelope

__all__ = ["add_actor_context", "configure_logging"]


def add_actor_context(
    _logger: Any, _method: str, event: MutableMapping[str, Any]
) -> MutableMapping[str, Any]:
    """structlog processor: add the running actor's name and current message type."""
    cell = current_cell.get()
    if cell is not None:
        event.setdefault("actor", cell.name)
        item = cell.current
        if item is not None:
            message = item.message if type(item) is AskEnvelope else item
            event.setdefault("msg_type", type(message).__name__)
    return event


def configure_logging(
    *, format: Literal["console", "json"] = "console", level: str = "info"
) -> None:
    """Configure structlog for the whole process (call once, at program start)."""
    renderer: Any = (
        structlog.processors.JSONRenderer()
        if format == "json"
        else structlog.dev.ConsoleRenderer(colors=sys.stderr.isatty())
    )
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            add_actor_context,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            structlog.processors.StackInfoRenderer(),
            *([structlog.processors.dict_tracebacks] if format == "json" else []),
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(
            logging.getLevelNamesMapping()[level.upper()]
        ),
        logger_factory=structlog.PrintLoggerFactory(file=sys.stderr),
        # No caching: loggers made at import time follow a later reconfiguration.
        cache_logger_on_first_use=False,
    )
