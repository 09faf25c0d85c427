"""Stopping: every accepted message is handled, or reported as dropped after the deadline."""

from __future__ import annotations

import anyio
import pytest
from anyio import wait_all_tasks_blocked
from hypothesis import given, settings
from hypothesis import strategies as st

from runtime import Actor, ActorSystem, EscalationError, handler
from tests.runtime._actors import Counter, Crash, Hold, Note, Recorder

pytestmark = pytest.mark.anyio


class Forwarder(Actor):
    """Passes each note on after a (virtual) pause: a slow stage in front of a sink."""

    def __init__(self, sink: object, pause: float) -> None:
        self.sink = sink
        self.pause = pause

    @handler
    async def forward(self, msg: Note) -> None:
        await anyio.sleep(self.pause)
        await self.sink.tell(msg)  # type: ignore[attr-defined]


@settings(max_examples=30, deadline=None)
@given(
    count=st.integers(min_value=0, max_value=200),
    mailbox_size=st.integers(min_value=1, max_value=64),
    pause=st.sampled_from([0.0, 0.001, 0.01]),
)
async def test_graceful_stop_handles_every_accepted_message(
    count: int, mailbox_size: int, pause: float
) -> None:
    seen: list[object] = []
    accepted = 0
    async with ActorSystem(lag_interval=None, stop_timeout=1e6) as system:
        sink = system.spawn(lambda: Recorder(seen), name="sink", mailbox_size=mailbox_size)
        stage = system.spawn(
            lambda: Forwarder(sink, pause), name="stage", mailbox_size=mailbox_size
        )
        for seq in range(count):
            accepted += stage.try_tell(Note(sender=0, seq=seq))
    assert len(seen) == accepted
    assert system.stop_report is not None
    assert system.stop_report.graceful
    assert system.stop_report.dropped == 0
    assert system.dead_letters.total == 0


async def test_stop_deadline_cancels_and_reports_what_was_dropped() -> None:
    seen: list[object] = []
    never = anyio.Event()
    async with ActorSystem(lag_interval=None, stop_timeout=5.0) as system:
        ref = system.spawn(lambda: Recorder(seen, never), name="stuck", mailbox_size=16)
        await ref.tell(Hold())
        await wait_all_tasks_blocked()
        for seq in range(7):
            await ref.tell(Note(sender=0, seq=seq))
        started = anyio.current_time()
    assert anyio.current_time() - started == pytest.approx(5.0, abs=0.01)
    report = system.stop_report
    assert report is not None
    assert not report.graceful
    assert report.dropped_by_actor == {"stuck": 7}
    assert report.dropped_by_type == {"Note": 7}
    # The message being handled at the deadline is a dead letter too, never silently lost.
    reasons = system.dead_letters.by_reason()
    assert reasons == {"cancelled": 1, "stop deadline": 7}


async def test_actors_stop_in_reverse_spawn_order() -> None:
    order: list[str] = []

    class Named(Actor):
        async def on_stop(self) -> None:
            order.append(self.name)

    async with ActorSystem(lag_interval=None) as system:
        for name in ["first", "second", "third"]:
            system.spawn(Named, name=name)
    assert order == ["third", "second", "first"]


async def test_escalation_while_draining_at_stop_ends_the_block_with_escalation_error() -> None:
    # The crash is handled only once the stop has begun: the root gives up mid-stop, and that
    # must surface as the escalation, not as a stray CancelledError out of the `async with`.
    with pytest.raises(EscalationError, match="'root' gave up"):
        async with ActorSystem(lag_interval=None, max_restarts=0) as system:
            ref = system.spawn(Counter, name="counter")
            assert ref.try_tell(Crash())
    assert system.stop_report is not None


async def test_an_explicit_stop_lets_the_block_go_on_and_reports_at_once() -> None:
    seen: list[object] = []
    after_stop: list[float] = []
    async with ActorSystem(lag_interval=0.1, handler_budget=1.0) as system:
        ref = system.spawn(lambda: Recorder(seen), name="r")
        assert ref.try_tell(Note(sender=0, seq=0))
        await system.stop()
        assert seen == [Note(sender=0, seq=0)]  # handled before stop() returned
        assert system.stop_report is not None
        assert system.stop_report.graceful
        assert system.statistics().actors == 0
        await anyio.sleep(1.0)  # the body is not cancelled by the stop it asked for
        after_stop.append(anyio.current_time())
    assert len(after_stop) == 1
    assert system.stop_report.dropped == 0
