"""Dead letters: messages that were accepted but never handled, kept on record.

A message becomes a dead letter when the handler handling it crashed, when it was still in a
mailbox that was cancelled at a stop deadline, or when no handler exists for its type. Each one
is logged, counted, and kept in a bounded list of recent records for inspection.
"""

from __future__ import annotations

import collections
import dataclasses
from typing import Any

import structlog

from runtime.metrics import MetricsRegistry

__all__ = ["DeadLetter", "DeadLetterOffice"]

_log = structlog.get_logger("roost.deadletters")


@dataclasses.dataclass(frozen=True, slots=True)
class DeadLetter:
    """One undelivered message: where it was going, what it was, and why it died."""

    actor: str
    message_type: str
    reason: str
    message: Any = dataclasses.field(repr=False)


class DeadLetterOffice:
    """Counts, logs and keeps the most recent `capacity` dead letters."""

    def __init__(self, metrics: MetricsRegistry, *, capacity: int = 1000) -> None:
        self._recent: collections.deque[DeadLetter] = collections.deque(maxlen=capacity)
        self._total = metrics.counter("dead_letters_total")
        self._by_reason: dict[str, int] = {}

    def post(self, actor: str, message: Any, reason: str, *, quiet: bool = False) -> None:
        """Record one dead letter; `quiet` skips the log line (for bulk drops logged as a sum)."""
        letter = DeadLetter(actor, type(message).__name__, reason, message)
        self._recent.append(letter)
        self._total.inc()
        self._by_reason[reason] = self._by_reason.get(reason, 0) + 1
        if not quiet:
            _log.warning("dead_letter", actor=actor, msg_type=letter.message_type, reason=reason)

    @property
    def total(self) -> int:
        return self._total.value

    def by_reason(self) -> dict[str, int]:
        return dict(self._by_reason)

    def recent(self) -> list[DeadLetter]:
        return list(self._recent)
