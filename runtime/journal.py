"""An append-only log of framed records that survives a crash at any byte.

Each record is a frame: a 4-byte little-endian length, a 4-byte CRC-32 of the payload, then the
payload (msgpack, by convention; never empty). A process killed mid-write leaves at most one
torn frame at the end; `read_journal` stops there and reports it, so a torn record is dropped,
never misread, and `JournalWriter` cuts it off before appending again (resume). Records are never
empty because an all-zero frame (length 0, CRC-32 of nothing = 0) is what a filesystem leaves
in a file extended but not written before a power loss: it must read as corruption, not as
records. When the cut-off tail is corruption rather than one torn frame (a bad checksum, an
impossible length, or a damaged length that reads as a torn record while whole frames follow
it), its bytes are kept beside the journal for a human to inspect.

Writes go to the page cache at once (a flush per record, microseconds); `sync()` forces them
to disk, and is what a checkpoint calls before it counts the journal as durable.
"""

from __future__ import annotations

import dataclasses
import os
import struct
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

__all__ = ["JournalReport", "JournalWriter", "iter_journal", "read_journal"]

_HEADER = struct.Struct("<II")
#: A frame larger than this is taken as corruption, not a record (records are small).
MAX_RECORD_BYTES = 64 * 1024 * 1024


@dataclasses.dataclass(frozen=True)
class JournalReport:
    """What a read found: whole records, and whether (and where) the tail was torn."""

    records: int
    valid_bytes: int
    torn: bool
    reason: str = ""


def iter_journal(path: str | os.PathLike[str]) -> Iterator[bytes]:
    """Every whole record's payload, in order; stops silently at a torn tail."""
    with open(path, "rb") as source:
        yield from _frames(source, report=None)


def read_journal(path: str | os.PathLike[str]) -> tuple[list[bytes], JournalReport]:
    """All whole records and a report on the tail. A missing file is an empty journal."""
    if not Path(path).exists():
        return [], JournalReport(0, 0, False)
    holder: list[JournalReport] = []
    with open(path, "rb") as source:
        records = list(_frames(source, report=holder))
    return records, holder[0]


def _frames(source: BinaryIO, report: list[JournalReport] | None) -> Iterator[bytes]:
    offset = 0
    count = 0
    reason = ""
    while True:
        header = source.read(_HEADER.size)
        if not header:
            break
        if len(header) < _HEADER.size:
            reason = f"torn header at byte {offset}"
            break
        length, crc = _HEADER.unpack(header)
        if length == 0:
            reason = f"empty frame at byte {offset} (zero-filled tail?)"
            break
        if length > MAX_RECORD_BYTES:
            reason = f"impossible length {length} at byte {offset}"
            break
        payload = source.read(length)
        if len(payload) < length:
            reason = f"torn record at byte {offset} ({len(payload)} of {length} bytes)"
            break
        if zlib.crc32(payload) != crc:
            reason = f"checksum mismatch at byte {offset}"
            break
        yield payload
        count += 1
        offset += _HEADER.size + length
    if report is not None:
        report.append(JournalReport(count, offset, bool(reason), reason))


def _keep_corrupt_tail(path: Path, report: JournalReport) -> Path | None:
    """Copy the tail about to be cut off to `<path>.dropped-<offset>` unless it is just one
    torn frame (the normal result of a crash mid-append, which holds nothing worth keeping)."""
    if report.reason.startswith("torn header"):
        return None  # fewer than 8 bytes left: nothing of a record
    with open(path, "rb") as source:
        source.seek(report.valid_bytes)
        tail = source.read()
    if report.reason.startswith("torn record") and not _holds_a_frame(tail):
        return None
    kept = path.with_name(f"{path.name}.dropped-{report.valid_bytes}")
    kept.write_bytes(tail)
    return kept


def _holds_a_frame(tail: bytes) -> bool:
    """Whether a whole, checksummed frame starts anywhere inside `tail` after its first
    header. A crash tears the last frame only, so its tail holds none; a length field damaged
    mid-file also reads as a torn record, but the records after it are still there, whole.
    The scan stops at the first frame found, which follows the damaged one."""
    for start in range(_HEADER.size, len(tail) - _HEADER.size):
        length, crc = _HEADER.unpack_from(tail, start)
        end = start + _HEADER.size + length
        if length > 0 and end <= len(tail) and zlib.crc32(tail[start + _HEADER.size : end]) == crc:
            return True
    return False


class JournalWriter:
    """Appends records to a journal, first cutting off a torn tail left by a crash."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        _, report = read_journal(self.path)
        self.recovered = report
        self._file = open(self.path, "ab")  # noqa: SIM115 - lives as long as the writer
        #: Where the bytes of a corrupt (not merely torn) tail were kept, if any.
        self.dropped_to: Path | None = None
        if report.torn:
            self.dropped_to = _keep_corrupt_tail(self.path, report)
            self._file.truncate(report.valid_bytes)
        self.records = report.records

    def append(self, payload: bytes) -> None:
        if not payload:
            raise ValueError("an empty record cannot be told from a zero-filled tail")
        if len(payload) > MAX_RECORD_BYTES:
            raise ValueError(f"record of {len(payload)} bytes exceeds {MAX_RECORD_BYTES}")
        # One write per frame: a crash tears at most this frame.
        self._file.write(_HEADER.pack(len(payload), zlib.crc32(payload)) + payload)
        self._file.flush()
        self.records += 1

    def sync(self) -> None:
        """Force everything appended so far to disk."""
        self._file.flush()
        os.fsync(self._file.fileno())

    def close(self) -> None:
        if not self._file.closed:
            try:
                self.sync()
            finally:  # a failed fsync (a full or vanished disk) still gives the handle back
                self._file.close()

    def __enter__(self) -> JournalWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
