"""The journal: whole records survive, a torn tail is detected and dropped, never misread."""

from __future__ import annotations

import zlib
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from runtime.journal import JournalWriter, read_journal


@settings(max_examples=60, deadline=None)
@given(
    records=st.lists(st.binary(min_size=1, max_size=200), min_size=1, max_size=20),
    cut=st.integers(min_value=0, max_value=10_000),
)
def test_a_crash_at_any_byte_keeps_every_whole_record_and_drops_the_torn_one(
    tmp_path_factory: object, records: list[bytes], cut: int
) -> None:
    path = Path(tmp_path_factory.mktemp("j")) / "log"  # type: ignore[attr-defined]
    with JournalWriter(path) as writer:
        for record in records:
            writer.append(record)
    data = path.read_bytes()
    cut = min(cut, len(data))
    path.write_bytes(data[:cut])  # the process died after writing `cut` bytes

    found, report = read_journal(path)
    assert found == records[: len(found)]  # a prefix, in order, never a misread record
    whole = sum(1 for end in _frame_ends(records) if end <= cut)
    assert len(found) == whole
    assert report.torn == (cut not in {0, *_frame_ends(records)})

    # Resume: the torn tail is cut off and appending continues cleanly; a torn last frame
    # holds nothing worth keeping aside.
    with JournalWriter(path) as writer:
        assert writer.dropped_to is None
        writer.append(b"after")
    again, report = read_journal(path)
    assert again == [*records[:whole], b"after"]
    assert not report.torn


def test_a_flipped_byte_is_caught_by_the_checksum(tmp_path: Path) -> None:
    path = tmp_path / "log"
    with JournalWriter(path) as writer:
        writer.append(b"first")
        writer.append(b"second")
    data = bytearray(path.read_bytes())
    data[-1] ^= 0xFF
    path.write_bytes(bytes(data))
    found, report = read_journal(path)
    assert found == [b"first"]
    assert report.torn
    assert "checksum mismatch" in report.reason
    assert zlib.crc32(b"first")  # the checksum is real CRC-32, not a constant


def _frame_ends(records: list[bytes]) -> list[int]:
    ends, offset = [], 0
    for record in records:
        offset += 8 + len(record)
        ends.append(offset)
    return ends


def test_a_failed_sync_at_close_still_closes_the_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    writer = JournalWriter(tmp_path / "log")
    writer.append(b"record")

    def full_disk(fd: int) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr("runtime.journal.os.fsync", full_disk)
    with pytest.raises(OSError, match="No space left"):
        writer.close()
    assert writer._file.closed  # the handle is given back, not leaked
