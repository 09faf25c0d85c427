"""Capped collection of a program's stdout and stderr.

A program may write far more than anyone wants to keep (or forever, until its timeout). The
collector keeps the first `limit` bytes exactly, counts the rest and keeps reading it: a reader
that stopped would leave the program blocked on a full pipe, which looks like a hang.
"""

from __future__ import annotations

from anyio.abc import ByteReceiveStream

DEFAULT_OUTPUT_LIMIT = 1024 * 1024
_READ_SIZE = 65536


class CappedBuffer:
    """Bytes up to `limit`, then only a count. `truncated` says whether anything was dropped."""

    __slots__ = ("_chunks", "_kept", "limit", "total")

    def __init__(self, limit: int = DEFAULT_OUTPUT_LIMIT) -> None:
        if limit < 0:
            raise ValueError(f"limit must be >= 0, got {limit}")
        self.limit = limit
        self.total = 0
        self._kept = 0
        self._chunks: list[bytes] = []

    def feed(self, data: bytes) -> None:
        self.total += len(data)
        room = self.limit - self._kept
        if room <= 0:
            return
        piece = data if len(data) <= room else data[:room]
        self._chunks.append(piece)
        self._kept += len(piece)

    @property
    def truncated(self) -> bool:
        return self.total > self.limit

    def value(self) -> bytes:
        if len(self._chunks) > 1:
            self._chunks = [b"".join(self._chunks)]
        return self._chunks[0] if self._chunks else b""


async def drain_into(stream: ByteReceiveStream, buffer: CappedBuffer) -> None:
    """Read `stream` to its end into `buffer` (never stops early, so the writer never blocks)."""
    from anyio import BrokenResourceError, ClosedResourceError, EndOfStream

    while True:
        try:
            data = await stream.receive(_READ_SIZE)
        except (EndOfStream, ClosedResourceError, BrokenResourceError):
            return
        buffer.feed(data)
