"""Request/reply: answers, deadlines that leave nothing behind, and errors that say who failed."""

from __future__ import annotations

import math

import anyio
import pytest
from anyio import wait_all_tasks_blocked

from runtime import (
    ActorCrashedError,
    ActorStoppedError,
    ActorSystem,
    AskTimeoutError,
    UnhandledMessageError,
)
from tests.conftest import REAL, VIRTUAL
from tests.runtime._actors import Add, Counter, Crash, Hold, Note, Read, Recorder

pytestmark = pytest.mark.anyio


@pytest.mark.parametrize("anyio_backend", [VIRTUAL, REAL])
async def test_ask_returns_the_handler_result(anyio_backend: object) -> None:
    async with ActorSystem(lag_interval=None) as system:
        counter = system.spawn(Counter, name="counter")
        for amount in range(10):
            await counter.tell(Add(amount=amount))
        assert await counter.ask(Read(), timeout=1.0) == 45


async def test_ask_timeout_raises_and_leaves_nothing_pending() -> None:
    seen: list[object] = []
    gate = anyio.Event()
    async with ActorSystem(lag_interval=None) as system:
        ref = system.spawn(lambda: Recorder(seen, gate), name="slow")
        await ref.tell(Hold())
        started = anyio.current_time()
        with pytest.raises(AskTimeoutError, match=r"slow did not answer Read within 2\.5s"):
            await ref.ask(Read(), timeout=2.5)
        assert 2.5 <= anyio.current_time() - started <= 2.51
        assert system.statistics().pending_asks == 0
        gate.set()
        # The expired ask is skipped, not answered late; later asks work.
        assert await ref.ask(Read(), timeout=1.0) == 1
        assert system.statistics().pending_asks == 0


async def test_ask_timeout_while_waiting_for_mailbox_room() -> None:
    gate = anyio.Event()
    async with ActorSystem(lag_interval=None) as system:
        ref = system.spawn(lambda: Recorder([], gate), name="full", mailbox_size=1)
        await ref.tell(Hold())
        await wait_all_tasks_blocked()
        assert ref.try_tell(Note(sender=0, seq=0))
        with pytest.raises(AskTimeoutError):
            await ref.ask(Read(), timeout=1.0)
        gate.set()


async def test_ask_whose_handler_crashes_raises_actor_crashed_with_the_cause() -> None:
    async with ActorSystem(lag_interval=None) as system:
        counter = system.spawn(Counter, name="counter")
        with pytest.raises(ActorCrashedError, match="counter crashed handling Crash") as info:
            await counter.ask(Crash(reason="kaboom"), timeout=1.0)
        assert isinstance(info.value.__cause__, RuntimeError)
        assert str(info.value.__cause__) == "kaboom"
        # Restarted (permanent by default), so it answers again, with fresh state.
        assert await counter.ask(Read(), timeout=1.0) == 0


async def test_ask_with_no_handler_raises_unhandled_and_dead_letters_it() -> None:
    async with ActorSystem(lag_interval=None) as system:
        counter = system.spawn(Counter, name="counter")
        with pytest.raises(UnhandledMessageError, match="counter has no handler for Note"):
            await counter.ask(Note(sender=0, seq=0), timeout=1.0)
        assert system.dead_letters.by_reason() == {"no handler": 1}


async def test_ask_a_stopped_actor_raises_actor_stopped() -> None:
    async with ActorSystem(lag_interval=None) as system:
        counter = system.spawn(Counter, name="counter")
    with pytest.raises(ActorStoppedError):
        await counter.ask(Read(), timeout=1.0)


@pytest.mark.parametrize("anyio_backend", ["trio"])
async def test_ask_works_on_trio_through_the_generic_path(anyio_backend: object) -> None:
    async with ActorSystem(lag_interval=None) as system:
        counter = system.spawn(Counter, name="counter")
        await counter.tell(Add(amount=3))
        assert await counter.ask(Read(), timeout=1.0) == 3
        with pytest.raises(ActorCrashedError):
            await counter.ask(Crash(), timeout=1.0)


async def test_ask_with_an_infinite_timeout_waits_for_the_reply() -> None:
    gate = anyio.Event()
    async with ActorSystem(lag_interval=None) as system:
        ref = system.spawn(lambda: Recorder([], gate), name="slow")
        await ref.tell(Hold())
        answers: list[object] = []

        async def ask_forever() -> None:
            answers.append(await ref.ask(Read(), timeout=math.inf))

        async with anyio.create_task_group() as group:
            group.start_soon(ask_forever)
            await anyio.sleep(3600.0)  # virtual: an hour passes, and the ask still waits
            assert answers == []
            gate.set()
        assert answers == [1]


@pytest.mark.parametrize("timeout", [math.nan, None, "1s"])
async def test_ask_with_a_timeout_that_is_not_seconds_fails_before_sending(
    timeout: object,
) -> None:
    seen: list[object] = []
    async with ActorSystem(lag_interval=None) as system:
        ref = system.spawn(lambda: Recorder(seen), name="r")
        with pytest.raises(ValueError, match="ask timeout must be a number of seconds"):
            await ref.ask(Note(sender=0, seq=0), timeout=timeout)  # type: ignore[arg-type]
        assert await ref.ask(Read(), timeout=1.0) == 0
    assert seen == []


@pytest.mark.parametrize("anyio_backend", ["trio", VIRTUAL])
async def test_a_cancelled_ask_is_skipped_by_the_actor(anyio_backend: object) -> None:
    seen: list[object] = []
    gate = anyio.Event()
    async with ActorSystem(lag_interval=None) as system:
        ref = system.spawn(lambda: Recorder(seen, gate), name="r")
        await ref.tell(Hold())

        async def ask_note() -> None:
            await ref.ask(Note(sender=0, seq=0), timeout=100.0)

        async with anyio.create_task_group() as group:
            group.start_soon(ask_note)
            await wait_all_tasks_blocked()  # the ask waits behind the Hold
            group.cancel_scope.cancel()
        gate.set()
        assert await ref.ask(Read(), timeout=1.0) == 1  # only the Hold was handled
    assert seen == [Hold()]
