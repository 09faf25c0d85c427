"""The runtime's collector tuning: freeze what lives once thousands of actors are spawned."""

from __future__ import annotations

import gc
import weakref
from collections.abc import Iterator

import pytest
from anyio import wait_all_tasks_blocked

from runtime import ActorSystem
from runtime.collector import TUNED_THRESHOLDS, freeze_long_lived
from tests.runtime._actors import Add, Counter, Read

pytestmark = pytest.mark.anyio


@pytest.fixture(autouse=True)
def untouched_collector() -> Iterator[tuple[int, int, int]]:
    """Each test starts from, and must leave, an unfrozen collector with its thresholds."""
    gc.unfreeze()
    thresholds = gc.get_threshold()
    yield thresholds
    leaked_freeze = gc.get_freeze_count()
    gc.unfreeze()
    gc.set_threshold(*thresholds)
    assert leaked_freeze == 0, "a test left objects frozen"


def _spawn(system: ActorSystem, count: int, start: int = 0) -> None:
    for i in range(start, start + count):
        system.spawn(Counter, name=f"counter-{i}", mailbox_size=4)


async def test_reaching_the_actor_count_freezes_once_after_the_burst(
    untouched_collector: tuple[int, int, int],
) -> None:
    async with ActorSystem(gc_freeze_actors=50) as system:
        _spawn(system, 120)  # one burst that passes the mark: one freeze, after it
        await wait_all_tasks_blocked()
        assert system.collector.freezes == 1
        assert gc.get_freeze_count() > 0
        assert gc.get_threshold() == TUNED_THRESHOLDS
        # The actors still work, and the frozen ones still answer.
        ref = system.lookup("counter-3")
        await ref.tell(Add(amount=2))
        assert await ref.ask(Read(), timeout=1.0) == 2
    assert gc.get_freeze_count() == 0
    assert gc.get_threshold() == untouched_collector


async def test_a_small_system_leaves_the_collector_alone(
    untouched_collector: tuple[int, int, int],
) -> None:
    async with ActorSystem(gc_freeze_actors=50) as system:
        _spawn(system, 49)
        await wait_all_tasks_blocked()
        assert system.collector.freezes == 0
        assert gc.get_freeze_count() == 0
        assert gc.get_threshold() == untouched_collector


async def test_freezes_again_each_time_the_actor_count_doubles() -> None:
    async with ActorSystem(gc_freeze_actors=50) as system:
        _spawn(system, 50)
        await wait_all_tasks_blocked()
        assert system.collector.freezes == 1
        _spawn(system, 49, start=50)  # 99 actors: under twice 50
        await wait_all_tasks_blocked()
        assert system.collector.freezes == 1
        _spawn(system, 1, start=99)
        await wait_all_tasks_blocked()
        assert system.collector.freezes == 2


async def test_none_never_tunes() -> None:
    async with ActorSystem(gc_freeze_actors=None) as system:
        _spawn(system, 200)
        await wait_all_tasks_blocked()
        assert system.collector.freezes == 0
        assert gc.get_freeze_count() == 0


async def test_the_last_system_out_unfreezes(untouched_collector: tuple[int, int, int]) -> None:
    async with ActorSystem(gc_freeze_actors=10) as outer:
        _spawn(outer, 10)
        await wait_all_tasks_blocked()
        async with ActorSystem(gc_freeze_actors=10) as inner:
            _spawn(inner, 10)
            await wait_all_tasks_blocked()
            assert inner.collector.freezes == 1
        # The outer system still relies on its freeze.
        assert gc.get_freeze_count() > 0
        assert gc.get_threshold() == TUNED_THRESHOLDS
    assert gc.get_freeze_count() == 0
    assert gc.get_threshold() == untouched_collector


class _Cyclic:
    def __init__(self) -> None:
        self.me = self


async def test_cyclic_garbage_frozen_with_the_system_is_freed_after_it_exits() -> None:
    # The documented price: a cycle alive at the freeze is not collected while frozen.
    async with ActorSystem(gc_freeze_actors=10) as system:
        cycle = _Cyclic()
        alive = weakref.ref(cycle)
        _spawn(system, 10)
        await wait_all_tasks_blocked()
        del cycle
        gc.collect()
        assert alive() is not None
    gc.collect()
    assert alive() is None


def test_freeze_long_lived_counts_what_it_froze() -> None:
    frozen = freeze_long_lived((1000, 10, 10))
    try:
        assert frozen == gc.get_freeze_count() > 0
        assert gc.get_threshold() == (1000, 10, 10)
    finally:
        gc.unfreeze()


def test_a_bad_actor_count_is_refused() -> None:
    with pytest.raises(ValueError, match="gc_freeze_actors must be at least 1"):
        ActorSystem(gc_freeze_actors=0)
