"""Keep CPython's cyclic collector from stalling the event loop when thousands of actors live.

A full collection walks every object the collector tracks. With 10,000 actors (their cells,
mailboxes, tasks, warm sandboxes) that is millions of objects and 300-700 ms with the loop
stopped, several times a minute while rollouts churn. Nearly all of those objects live as long
as the system, so walking them again and again finds nothing.

`freeze_long_lived` collects once, then moves every object alive into the collector's permanent
generation (`gc.freeze()`): later collections no longer walk them. It also makes collections
rarer (`TUNED_THRESHOLDS`: a young one every 50,000 net allocations instead of 700), so cyclic
garbage made later waits a little longer to be freed. `ActorSystem` calls it on its own, once
spawning settles, whenever the actor count first reaches `gc_freeze_actors` (1,000 by default)
and again each time the count doubles; below that the collector costs little and nothing
changes.

The price, and why it is safe: frozen objects are still freed by reference counting as usual,
but one that becomes part of *cyclic* garbage is never collected while frozen (for example a
crashed actor instance held in a cycle by its traceback). Such leaks are bounded by what was
alive at the freeze, and end when the last tuned `ActorSystem` exits, which unfreezes
(`gc.unfreeze()`) and restores the thresholds it found.
"""

from __future__ import annotations

import gc

import anyio.abc
import structlog
from anyio.lowlevel import checkpoint

__all__ = ["TUNED_THRESHOLDS", "CollectorTuner", "freeze_long_lived"]

_log = structlog.get_logger("roost.collector")

#: (young, middle, full) after a freeze, chosen with scripts/probe_loop_lag.py at 10,000 rollouts
#: in flight, where the loop is short of CPU and the collector's *total* work is what lags it.
#: CPython's (700, 10, 10): 4.6 s of collection per round (625 young, 56 middle, 4 full of up to
#: 840 ms). Frozen with (700, 10, 100): no full one, but still 2.8 s (young collections promote
#: every rollout in flight, and middle ones walk them again: 58 of 33 ms). (10,000, 20, 100):
#: 1.1 s, young ones up to 156 ms. (50,000, 20, 100): 0.25 s, 4 young collections of 60-90 ms
#: and nothing else, lag p99 3x lower than untuned. Most objects of a turn are freed by reference
#: counting before 50,000 allocations pass, so a rare young collection finds few survivors.
TUNED_THRESHOLDS = (50_000, 20, 100)

#: Systems that froze and have not exited; the last one out restores the collector.
_holders = 0
_saved_thresholds: tuple[int, int, int] | None = None


def freeze_long_lived(thresholds: tuple[int, int, int] | None = None) -> int:
    """Collect, freeze every object alive out of the collector's reach, set `thresholds`
    (default `TUNED_THRESHOLDS`).

    Blocks for one full collection (hundreds of milliseconds with 10,000 actors): call it after
    start-up, not in a hot path. Returns how many objects are frozen now.
    """
    gc.collect()
    gc.freeze()
    gc.set_threshold(*(TUNED_THRESHOLDS if thresholds is None else thresholds))
    return gc.get_freeze_count()


class CollectorTuner:
    """An `ActorSystem`'s use of `freeze_long_lived`: freeze after each burst of spawns that
    takes the actor count to `freeze_at`, then to twice the count at the last freeze.

    :param freeze_at: actors at the first freeze; None: never tune the collector.
    """

    def __init__(self, freeze_at: int | None) -> None:
        if freeze_at is not None and freeze_at < 1:
            raise ValueError(f"gc_freeze_actors must be at least 1 or None, got {freeze_at}")
        self._next_at = freeze_at
        self._spawns = 0
        self._actors = 0
        self._pending = False
        self._holding = False
        self.freezes = 0

    def spawned(self, actors: int, group: anyio.abc.TaskGroup) -> None:
        """An actor was spawned and `actors` are registered: maybe schedule a freeze."""
        self._spawns += 1
        self._actors = actors
        if self._next_at is None or self._pending or actors < self._next_at:
            return
        self._pending = True
        group.start_soon(self._freeze_after_burst, name="roost:gc-freeze")

    async def _freeze_after_burst(self) -> None:
        # Spawns come in bursts (a loop of spawn calls): freeze once the loop has gone round
        # with no new spawn, so one freeze covers the whole burst.
        while True:
            seen = self._spawns
            await checkpoint()
            if seen == self._spawns:
                break
        global _holders, _saved_thresholds
        if not self._holding:
            if _holders == 0:
                _saved_thresholds = gc.get_threshold()
            _holders += 1
            self._holding = True
        frozen = freeze_long_lived()
        self.freezes += 1
        self._next_at = 2 * self._actors
        self._pending = False
        _log.info("gc_frozen", objects=frozen, next_at_actors=self._next_at)

    def close(self) -> None:
        """The system exits: the last tuned system out unfreezes and restores the thresholds."""
        global _holders, _saved_thresholds
        if not self._holding:
            return
        self._holding = False
        _holders -= 1
        if _holders == 0:
            gc.unfreeze()
            if _saved_thresholds is not None:
                gc.set_threshold(*_saved_thresholds)
            _saved_thresholds = None
