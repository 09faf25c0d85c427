"""`Recorder`: every terminal record and event it is told goes to an append-only journal.

The journal (`runtime/journal.py`) survives a crash at any byte: after `kill -9` the records
read back are exactly those fully written, in order. `read_records` decodes them to their
message types.
"""

from __future__ import annotations

import os
from typing import Any, TypeVar

import msgspec

from runtime import Actor, Message, MessageDecoder, encode, handler
from runtime.journal import JournalReport, JournalWriter, read_journal

__all__ = ["Flush", "Recorder", "read_records"]

T = TypeVar("T")


class Flush(Message):
    """Force what was recorded to disk (a checkpoint asks before it commits)."""


class Recorder(Actor):
    """Appends each message it receives (any `Message` but `Flush`) to the journal at `path`."""

    def __init__(self, path: str | os.PathLike[str], *, sync_every: int = 1000) -> None:
        self.path = path
        self.sync_every = sync_every
        self._writer: JournalWriter | None = None

    async def on_start(self) -> None:
        self._writer = JournalWriter(self.path)
        if self._writer.recovered.torn:
            self.log.warning("journal_torn_tail_dropped", reason=self._writer.recovered.reason)

    async def on_stop(self) -> None:
        if self._writer is not None:
            self._writer.close()

    @handler(Flush)
    def flush(self, msg: Flush) -> int:
        assert self._writer is not None
        self._writer.sync()
        return self._writer.records

    @handler(Message)
    def record(self, msg: Message) -> None:
        assert self._writer is not None
        self._writer.append(encode(msg))
        if self._writer.records % self.sync_every == 0:
            self._writer.sync()


def read_records(
    path: str | os.PathLike[str], type: Any
) -> tuple[list[Any], JournalReport, list[str]]:
    """Decode every whole record as `type` (a message class or union).

    Returns the records, the journal report (torn tail or not), and a description of each
    record that did not decode (kept out, never guessed at).
    """
    decoder: MessageDecoder[Any] = MessageDecoder(type)
    payloads, report = read_journal(path)
    records: list[Any] = []
    bad: list[str] = []
    for index, payload in enumerate(payloads):
        try:
            records.append(decoder.decode(payload))
        except (msgspec.DecodeError, ValueError) as exc:
            bad.append(f"record {index}: {exc}")
    return records, report, bad
