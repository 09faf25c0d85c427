"""Fuzzing the trajectory-log reader (runtime/journal.py) with torn, truncated, bit-flipped,
zero-filled and garbage tails.

The invariant: what `read_journal` returns is always a prefix of what was written, byte for
byte (a damaged record is dropped, never misread), the report says the tail was damaged and at
which byte, and a writer reopening the file continues cleanly after the last whole record.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from runtime.journal import JournalWriter, iter_journal, read_journal
from tests.reliability.conftest import FUZZ

records_strategy = st.lists(st.binary(min_size=1, max_size=120), min_size=1, max_size=12)


def _write(path: Path, records: list[bytes]) -> bytes:
    with JournalWriter(path) as writer:
        for record in records:
            writer.append(record)
    return path.read_bytes()


def _ends(records: list[bytes]) -> list[int]:
    ends, offset = [], 0
    for record in records:
        offset += 8 + len(record)
        ends.append(offset)
    return ends


def _check_prefix(path: Path, records: list[bytes]) -> list[bytes]:
    found, report = read_journal(path)
    assert found == records[: len(found)]
    assert report.records == len(found)
    assert report.valid_bytes == ([0, *_ends(records)])[len(found)]
    assert list(iter_journal(path)) == found
    return found


@FUZZ
@given(records=records_strategy, data=st.data())
def test_fuzz_journal_bit_flip_anywhere_drops_from_the_damaged_record_on(
    tmp_path_factory: pytest.TempPathFactory, records: list[bytes], data: st.DataObject
) -> None:
    path = tmp_path_factory.mktemp("j") / "log"
    raw = bytearray(_write(path, records))
    bit = data.draw(st.integers(0, len(raw) * 8 - 1))
    raw[bit // 8] ^= 1 << (bit % 8)
    path.write_bytes(bytes(raw))

    found = _check_prefix(path, records)
    damaged = next(i for i, end in enumerate(_ends(records)) if bit // 8 < end)
    assert len(found) == damaged  # CRC-32 catches every single-bit error
    _, report = read_journal(path)
    assert report.torn
    assert f"at byte {report.valid_bytes}" in report.reason


@FUZZ
@given(records=records_strategy, garbage=st.binary(min_size=1, max_size=64))
def test_fuzz_journal_garbage_tail_is_detected_and_cut_on_resume(
    tmp_path_factory: pytest.TempPathFactory, records: list[bytes], garbage: bytes
) -> None:
    path = tmp_path_factory.mktemp("j") / "log"
    path.write_bytes(_write(path, records) + garbage)
    found = _check_prefix(path, records)
    assert found == records  # whole records before the garbage all survive
    _, report = read_journal(path)
    assert report.torn
    assert report.valid_bytes == _ends(records)[-1]

    with JournalWriter(path) as writer:  # resume appends after the last whole record
        assert writer.records == len(records)
        writer.append(b"after")
    again, report = read_journal(path)
    assert again == [*records, b"after"]
    assert not report.torn


@FUZZ
@given(records=records_strategy, zeros=st.integers(1, 100))
def test_fuzz_journal_zero_filled_tail_is_not_read_as_records(
    tmp_path_factory: pytest.TempPathFactory, records: list[bytes], zeros: int
) -> None:
    # What a filesystem can leave after a power loss: the size grew, the data never landed.
    path = tmp_path_factory.mktemp("j") / "log"
    path.write_bytes(_write(path, records) + b"\0" * zeros)
    found, report = read_journal(path)
    assert found == records
    assert report.torn
    assert ("empty frame" if zeros >= 8 else "torn header") in report.reason


@FUZZ
@given(data=st.binary(max_size=400))
def test_fuzz_journal_random_file_reads_without_crashing(
    tmp_path_factory: pytest.TempPathFactory, data: bytes
) -> None:
    path = tmp_path_factory.mktemp("j") / "log"
    path.write_bytes(data)
    found, report = read_journal(path)
    assert report.valid_bytes <= len(data)
    assert report.torn == (report.valid_bytes < len(data))
    offset = 0
    for payload in found:  # anything accepted really is a whole, checksummed frame
        length, crc = struct.unpack_from("<II", data, offset)
        assert length == len(payload) > 0
        assert crc == zlib.crc32(payload)
        offset += 8 + length


def _flip_first_payload_byte(raw: bytearray, start: int) -> None:
    raw[start + 8] ^= 0xFF


def _length_past_the_end(raw: bytearray, start: int) -> None:
    # Reads as a torn record, the shape a crash leaves; but whole frames follow it.
    struct.pack_into("<I", raw, start, len(raw) - start)


@FUZZ
@pytest.mark.parametrize(
    ("damage", "reason"),
    [(_flip_first_payload_byte, "checksum mismatch"), (_length_past_the_end, "torn record")],
)
@given(records=st.lists(st.binary(min_size=1, max_size=40), min_size=3, max_size=8), data=st.data())
def test_fuzz_journal_corruption_mid_file_keeps_the_dropped_bytes_aside(
    tmp_path_factory: pytest.TempPathFactory,
    damage: Callable[[bytearray, int], None],
    reason: str,
    records: list[bytes],
    data: st.DataObject,
) -> None:
    path = tmp_path_factory.mktemp("j") / "log"
    raw = bytearray(_write(path, records))
    victim = data.draw(st.integers(0, len(records) - 2))  # not the last: data follows it
    start = ([0, *_ends(records)])[victim]
    damage(raw, start)
    path.write_bytes(bytes(raw))

    writer = JournalWriter(path)
    writer.close()
    assert writer.recovered.records == victim
    assert reason in writer.recovered.reason
    assert writer.dropped_to is not None
    assert writer.dropped_to.read_bytes() == bytes(raw[start:])  # nothing silently destroyed
    assert read_journal(path)[0] == records[:victim]


def test_fuzz_journal_refuses_an_empty_record(tmp_path: Path) -> None:
    with JournalWriter(tmp_path / "log") as writer, pytest.raises(ValueError, match="empty"):
        writer.append(b"")


def test_fuzz_journal_impossible_length_is_reported_not_allocated(tmp_path: Path) -> None:
    path = tmp_path / "log"
    path.write_bytes(_write(path, [b"ok"]) + struct.pack("<II", 0xFFFFFFFF, 0) + b"x" * 16)
    found, report = read_journal(path)
    assert found == [b"ok"]
    assert "impossible length 4294967295 at byte 10" in report.reason
