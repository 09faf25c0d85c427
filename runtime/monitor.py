"""Background tasks that watch the runtime: event-loop lag, and a periodic JSONL metrics log."""

from __future__ import annotations

import os
import time
from pathlib import Path

import anyio
import msgspec

from runtime.metrics import Histogram, MetricsRegistry

__all__ = ["measure_loop_lag", "write_metrics_jsonl"]


async def measure_loop_lag(histogram: Histogram, *, interval: float = 0.1) -> None:
    """Record, every `interval`, how late the loop woke us: the time a callback waits to run.

    Lag is measured on the wall clock (a virtual clock never lags). Runs until cancelled.
    """
    while True:
        started = time.perf_counter()
        await anyio.sleep(interval)
        histogram.record(max(0.0, time.perf_counter() - started - interval))


async def write_metrics_jsonl(
    registry: MetricsRegistry, path: str | os.PathLike[str], *, interval: float = 1.0
) -> None:
    """Append one JSON line with a snapshot of `registry` every `interval` seconds.

    Each line carries `t` (the loop clock) and `wall` (Unix time). The file is opened in append
    mode and each line is written whole, so a reader never sees half a record except at a crash,
    and then only in the last line. A final line is written when the task is cancelled.
    """
    encoder = msgspec.json.Encoder()
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    # Plain buffered writes, not a worker thread: one short line per interval lands in the page
    # cache in microseconds, and work in threads would take no time under the virtual clock.
    _cut_torn_line(Path(path))
    with open(path, "ab") as out:  # noqa: ASYNC230
        try:
            while True:
                await anyio.sleep(interval)
                out.write(_line(encoder, registry))
                out.flush()
        finally:
            out.write(_line(encoder, registry))
            out.flush()


def _cut_torn_line(path: Path) -> None:
    """A process killed mid-write leaves a last line without its newline: cut it off before
    appending (resume), or the next line would be glued to it and both would be misread."""
    if not path.exists():
        return
    with open(path, "rb+") as file:
        size = file.seek(0, os.SEEK_END)
        if size == 0:
            return
        file.seek(size - 1)
        if file.read(1) == b"\n":
            return
        keep = size
        while keep > 0:
            step = min(keep, 65536)
            file.seek(keep - step)
            newline = file.read(step).rfind(b"\n")
            if newline >= 0:
                keep = keep - step + newline + 1
                break
            keep -= step
        file.truncate(keep)


def _line(encoder: msgspec.json.Encoder, registry: MetricsRegistry) -> bytes:
    record = {"t": anyio.current_time(), "wall": time.time(), **registry.snapshot()}
    return encoder.encode(_finite(record)) + b"\n"


def _finite(value: object) -> object:
    # JSON has no NaN; an empty histogram's percentiles become null.
    if isinstance(value, float) and value != value:
        return None
    if isinstance(value, dict):
        return {key: _finite(item) for key, item in value.items()}
    return value
