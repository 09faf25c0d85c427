"""What `roost bench scale` reads while it plays: memory at the peak, loop lag, the collector.

`MemoryProbe` traces allocations (tracemalloc) from its creation until `read()`, then breaks
the traced bytes down by package. `sample_lag` records how late the loop wakes a sleeper, and
how much of that the loop's own CPU work explains. `gc_mode` sets the cyclic collector up for a
round: as the runtime tunes it (`runtime.collector`), or untuned, as CPython configures it.
"""

from __future__ import annotations

import contextlib
import gc
import time
import tracemalloc
from collections.abc import Iterator, Sequence

import anyio

from runtime import Histogram
from runtime.collector import freeze_long_lived

__all__ = [
    "GC_MODES",
    "LAG_INTERVAL_S",
    "MemoryProbe",
    "gc_mode",
    "sample_lag",
]

LAG_INTERVAL_S = 0.005
#: The collector's thresholds as CPython ships them.
CPYTHON_GC_THRESHOLDS = (700, 10, 10)
GC_MODES = ("default", "untuned")

#: Source files grouped for the memory breakdown, first match wins.
_SOURCE_GROUPS = (
    ("site-packages/anyio", "anyio"),
    ("site-packages/uvloop", "asyncio/uvloop"),
    ("/asyncio/", "asyncio/uvloop"),
    ("site-packages/msgspec", "msgspec"),
    ("site-packages", "other libraries"),
    ("/runtime/", "runtime/"),
    ("/actors/", "actors/"),
    ("/sandboxes/", "sandboxes/"),
    ("/roost/bench/", "bench harness"),
    ("/policies/", "policies/"),
    ("/tasks/", "tasks/"),
    ("/lib/python3", "python stdlib"),
)


def _group_of(filename: str) -> str:
    for needle, group in _SOURCE_GROUPS:
        if needle in filename:
            return group
    return "other"


class MemoryProbe:
    """Reads tracemalloc once, at the peak, and stops it."""

    def __init__(self, backend_files: Sequence[str]) -> None:
        self.backend_files = backend_files
        gc.collect()
        tracemalloc.start()
        self.baseline = tracemalloc.get_traced_memory()[0]
        self.peak_bytes = 0
        self.by_group: dict[str, int] = {}
        self.backend_bytes = 0

    def read(self) -> None:
        self.peak_bytes = tracemalloc.get_traced_memory()[0] - self.baseline
        snapshot = tracemalloc.take_snapshot()
        tracemalloc.stop()
        for stat in snapshot.statistics("filename"):
            name = stat.traceback[0].filename
            group = _group_of(name)
            self.by_group[group] = self.by_group.get(group, 0) + stat.size
            if any(name.endswith(f) for f in self.backend_files):
                self.backend_bytes += stat.size

    def stop(self) -> None:
        if tracemalloc.is_tracing():
            tracemalloc.stop()


@contextlib.contextmanager
def gc_mode(mode: str) -> Iterator[None]:
    """`default`: the collector as the runtime left it (an `ActorSystem` with thousands of
    actors has frozen them, see `runtime.collector`). `untuned`: CPython's collector as it
    comes, nothing frozen, default thresholds; the runtime's tuning is put back afterwards.

    Either way the round starts after a full collection (not timed), so that it does not
    inherit collections the previous round made due: the rounds differ only in the mode."""
    if mode == "default":
        gc.collect()
        yield
        return
    thresholds = gc.get_threshold()
    was_frozen = gc.get_freeze_count() > 0
    gc.unfreeze()
    gc.set_threshold(*CPYTHON_GC_THRESHOLDS)
    gc.collect()
    try:
        yield
    finally:
        if was_frozen:
            freeze_long_lived(thresholds)
        else:
            gc.set_threshold(*thresholds)


async def sample_lag(wall: Histogram, own: Histogram) -> None:
    """How late a sleep wakes (`wall`), and the part of it the loop's own work can explain
    (`own`: at most the CPU time the loop's thread used meanwhile). Other processes on the
    machine inflate the first, never the second; blocking calls that burn no CPU would escape
    the second, which is why both are reported."""
    while True:
        started, cpu = time.perf_counter(), time.thread_time()
        await anyio.sleep(LAG_INTERVAL_S)
        late = max(0.0, time.perf_counter() - started - LAG_INTERVAL_S)
        wall.record(late)
        own.record(min(late, time.thread_time() - cpu))
