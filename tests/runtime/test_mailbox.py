"""Mailbox semantics: per-sender order, bounded capacity, backpressure."""

from __future__ import annotations

import anyio
import pytest
from anyio import wait_all_tasks_blocked
from hypothesis import given, settings
from hypothesis import strategies as st

from runtime import ActorStoppedError, ActorSystem, Restart
from runtime._cell import _peekable_state
from tests.conftest import REAL
from tests.runtime._actors import Crash, Hold, Note, Read, Recorder

pytestmark = pytest.mark.anyio


@settings(max_examples=40, deadline=None)
@given(
    counts=st.lists(st.integers(min_value=0, max_value=60), min_size=1, max_size=5),
    mailbox_size=st.integers(min_value=1, max_value=8),
)
async def test_messages_from_each_sender_arrive_in_order(
    counts: list[int], mailbox_size: int
) -> None:
    seen: list[object] = []
    async with ActorSystem(lag_interval=None) as system:
        ref = system.spawn(lambda: Recorder(seen), name="recorder", mailbox_size=mailbox_size)

        async def send(sender: int, count: int) -> None:
            for seq in range(count):
                await ref.tell(Note(sender=sender, seq=seq))

        async with anyio.create_task_group() as senders:
            for sender, count in enumerate(counts):
                senders.start_soon(send, sender, count)

    for sender, count in enumerate(counts):
        received = [m.seq for m in seen if isinstance(m, Note) and m.sender == sender]
        assert received == list(range(count))


@settings(max_examples=20, deadline=None)
@given(capacity=st.integers(min_value=1, max_value=16))
async def test_full_mailbox_blocks_tell_and_never_holds_more_than_capacity(capacity: int) -> None:
    seen: list[object] = []
    gate = anyio.Event()
    async with ActorSystem(lag_interval=None) as system:
        ref = system.spawn(lambda: Recorder(seen, gate), name="r", mailbox_size=capacity)
        await ref.tell(Hold())
        await wait_all_tasks_blocked()  # the actor now sits in the Hold handler
        for seq in range(capacity):
            assert ref.try_tell(Note(sender=0, seq=seq))
        assert not ref.try_tell(Note(sender=0, seq=capacity)), "accepted past capacity"
        depth = system.metrics.gauge("actor.r.mailbox_depth")
        assert depth.read() == capacity

        delivered = anyio.Event()

        async def blocked_sender() -> None:
            await ref.tell(Note(sender=1, seq=0))
            delivered.set()

        system_tg = anyio.create_task_group()
        async with system_tg:
            system_tg.start_soon(blocked_sender)
            await wait_all_tasks_blocked()
            assert not delivered.is_set(), "tell returned while the mailbox was full"
            assert depth.read() == capacity
            gate.set()
            await delivered.wait()
        assert await ref.ask(Read(), timeout=5) == capacity + 2


async def test_tell_to_a_stopped_actor_raises_and_try_tell_says_no() -> None:
    seen: list[object] = []
    async with ActorSystem(lag_interval=None) as system:
        ref = system.spawn(lambda: Recorder(seen), name="r")
    with pytest.raises(ActorStoppedError, match="r is stopped"):
        await ref.tell(Note(sender=0, seq=0))
    assert not ref.try_tell(Note(sender=0, seq=0))


async def test_spawning_a_name_twice_is_refused() -> None:
    async with ActorSystem(lag_interval=None) as system:
        system.spawn(lambda: Recorder([]), name="twin")
        with pytest.raises(ValueError, match="already running"):
            system.spawn(lambda: Recorder([]), name="twin")
        assert system.lookup("twin").name == "twin"
        with pytest.raises(KeyError, match="no actor named 'ghost'"):
            system.lookup("ghost")


async def test_a_mailbox_of_size_zero_is_refused() -> None:
    async with ActorSystem(lag_interval=None) as system:
        with pytest.raises(ValueError, match="mailbox_size must be at least 1"):
            system.spawn(lambda: Recorder([]), name="r", mailbox_size=0)


def test_anyio_stream_state_the_fast_path_reads_is_still_there() -> None:
    # The serve loop reads anyio's private stream state (see runtime/_cell.py); if an anyio
    # upgrade changes it, the loop falls back to public calls, and this test says so loudly.
    send, receive = anyio.create_memory_object_stream[int](4)
    with send, receive:
        assert _peekable_state(receive) is not None


@pytest.mark.parametrize("anyio_backend", [REAL])
async def test_public_receive_path_delivers_the_same(
    anyio_backend: object, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("runtime._cell._peekable_state", lambda stream: None)
    seen: list[object] = []
    async with ActorSystem(lag_interval=None) as system:
        ref = system.spawn(lambda: Recorder(seen), name="r", mailbox_size=2)
        for seq in range(100):
            await ref.tell(Note(sender=0, seq=seq))
        assert await ref.ask(Read(), timeout=5) == 100
    assert [m.seq for m in seen if isinstance(m, Note)] == list(range(100))


async def test_mailbox_depth_of_an_actor_spawned_under_a_freed_name_reads_its_own_mailbox() -> None:
    gate = anyio.Event()
    async with ActorSystem(lag_interval=None) as system:
        first = system.spawn(lambda: Recorder([]), name="r", restart=Restart.TEMPORARY)
        await first.tell(Crash())
        await wait_all_tasks_blocked()
        assert system.statistics().actors == 0  # "r" is free again
        second = system.spawn(lambda: Recorder([], gate), name="r")
        await second.tell(Hold())
        await wait_all_tasks_blocked()
        assert second.try_tell(Note(sender=0, seq=0))
        assert system.metrics.snapshot()["actor.r.mailbox_depth"] == 1
        gate.set()
