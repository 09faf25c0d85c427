"""Timers: on time, on schedule, and silent for good once cancelled."""

from __future__ import annotations

import anyio
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from runtime import Actor, ActorSystem, Message, Restart, handler
from tests.runtime._actors import Note

pytestmark = pytest.mark.anyio


class Stop(Message):
    pass


class Clocked(Actor):
    """Records the (virtual) time each note arrives."""

    def __init__(self, arrivals: list[tuple[float, int]]) -> None:
        self.arrivals = arrivals

    @handler
    def note(self, msg: Note) -> None:
        self.arrivals.append((anyio.current_time(), msg.seq))

    @handler
    def stop_now(self, msg: Stop) -> None:
        self.stop()


async def test_send_after_delivers_once_after_the_delay() -> None:
    arrivals: list[tuple[float, int]] = []
    async with ActorSystem(lag_interval=None) as system:
        ref = system.spawn(lambda: Clocked(arrivals), name="c")
        start = anyio.current_time()
        timer = system.send_after(ref, Note(sender=0, seq=1), 3.0)
        await anyio.sleep(10.0)
    assert [(round(t - start, 6), seq) for t, seq in arrivals] == [(3.0, 1)]
    assert timer.deliveries == 1


async def test_send_periodic_keeps_a_fixed_schedule() -> None:
    arrivals: list[tuple[float, int]] = []
    async with ActorSystem(lag_interval=None) as system:
        ref = system.spawn(lambda: Clocked(arrivals), name="c")
        start = anyio.current_time()
        timer = system.send_periodic(ref, Note(sender=0, seq=0), 0.5)
        await anyio.sleep(2.6)
        timer.cancel()
        await anyio.sleep(5.0)
    assert [round(t - start, 6) for t, _ in arrivals] == [0.5, 1.0, 1.5, 2.0, 2.5]


@settings(max_examples=60, deadline=None)
@given(
    delays=st.lists(st.floats(min_value=0.0, max_value=5.0), min_size=1, max_size=20),
    cancel_at=st.floats(min_value=0.0, max_value=5.0),
    periodic=st.booleans(),
)
async def test_a_cancelled_timer_never_delivers(
    delays: list[float], cancel_at: float, periodic: bool
) -> None:
    arrivals: list[tuple[float, int]] = []
    async with ActorSystem(lag_interval=None) as system:
        ref = system.spawn(lambda: Clocked(arrivals), name="c", mailbox_size=1)
        start = anyio.current_time()
        timers = [
            system.send_periodic(ref, Note(sender=0, seq=i), delay + 0.01)
            if periodic
            else system.send_after(ref, Note(sender=0, seq=i), delay)
            for i, delay in enumerate(delays)
        ]
        await anyio.sleep(cancel_at)
        for timer in timers:
            timer.cancel()
        counted = len(arrivals) + int(system.metrics.gauge("actor.c.mailbox_depth").read())
        await anyio.sleep(20.0)
    # Nothing was told after cancel(): whatever arrived was in the mailbox by then.
    assert len(arrivals) == counted
    assert all(t - start <= cancel_at + 1e-9 for t, _ in arrivals[: len(arrivals) - 1] or [])
    assert sum(timer.deliveries for timer in timers) == len(arrivals)


async def test_timers_are_cancelled_when_the_system_stops() -> None:
    arrivals: list[tuple[float, int]] = []
    async with ActorSystem(lag_interval=None) as system:
        ref = system.spawn(lambda: Clocked(arrivals), name="c")
        timer = system.send_after(ref, Note(sender=0, seq=0), 100.0)
    assert timer.cancelled
    assert arrivals == []


async def test_a_periodic_timer_whose_actor_stopped_finishes() -> None:
    arrivals: list[tuple[float, int]] = []
    async with ActorSystem(lag_interval=None) as system:
        ref = system.spawn(lambda: Clocked(arrivals), name="c", restart=Restart.TEMPORARY)
        timer = system.send_periodic(ref, Note(sender=0, seq=0), 1.0)
        await anyio.sleep(1.5)
        await ref.tell(Stop())
        await anyio.sleep(1.0)  # virtual: the next tick finds the actor stopped
        assert timer.cancelled
        assert timer.finished  # so ActorSystem._track can prune it
    assert len(arrivals) == 1
