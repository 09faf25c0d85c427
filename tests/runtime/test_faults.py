"""Fault injection and keep_state restarts: crashes on purpose, state kept where asked."""

from __future__ import annotations

import pytest

from runtime import ActorCrashedError, ActorSystem, handler
from runtime.faults import CrashInjector
from tests.runtime._actors import Add, Counter, Crash, Read

pytestmark = pytest.mark.anyio


class StartCounter(Counter):
    """A counter that also counts its on_start calls (in a list the test owns)."""

    def __init__(self, starts: list[int]) -> None:
        super().__init__()
        self.starts = starts

    async def on_start(self) -> None:
        self.starts.append(1)


async def test_keep_state_resumes_the_crashed_instance_without_on_start_again() -> None:
    starts: list[int] = []
    async with ActorSystem(lag_interval=None, max_restarts=10) as system:
        counter = system.spawn(lambda: StartCounter(starts), name="counter", keep_state=True)
        for message in (Add(amount=1), Crash(), Add(amount=2), Crash(), Add(amount=4)):
            assert counter.try_tell(message)
        assert await counter.ask(Read(), timeout=1.0) == 7
        assert system.statistics().restarts == 2
    assert starts == [1]


async def test_without_keep_state_a_crash_starts_a_fresh_instance() -> None:
    starts: list[int] = []
    async with ActorSystem(lag_interval=None, max_restarts=10) as system:
        counter = system.spawn(lambda: StartCounter(starts), name="counter")
        for message in (Add(amount=1), Crash(), Add(amount=2)):
            assert counter.try_tell(message)
        assert await counter.ask(Read(), timeout=1.0) == 2
    assert starts == [1, 1]


async def test_injected_crashes_lose_exactly_the_dead_lettered_messages() -> None:
    injector = CrashInjector({"tally": 0.2}, seed=5, spare=(Read,))
    async with ActorSystem(
        lag_interval=None, max_restarts=1_000, fault_injector=injector
    ) as system:
        tallies = [
            system.spawn(Counter, name=f"tally-{i}", keep_state=True, mailbox_size=512)
            for i in range(2)
        ]
        for tally in tallies:
            for _ in range(200):
                await tally.tell(Add(amount=1))
        totals = [await tally.ask(Read(), timeout=5.0) for tally in tallies]
        letters = system.dead_letters.recent()
    crashed = injector.crashes["tally"]
    assert 0 < crashed < 400
    assert sum(totals) == 400 - crashed
    assert sum(1 for d in letters if d.message_type == "Add" and d.reason == "crashed") == crashed
    assert system.statistics().restarts == crashed


def test_the_injector_draws_by_role_and_spares_what_it_is_told_to() -> None:
    injector = CrashInjector({"worker": 1.0}, spare=(Read,))
    assert injector("worker-12", Add(amount=1))
    assert not injector("worker-3", Read())
    assert not injector("scheduler", Add(amount=1))
    assert injector.crashes == {"worker": 1}
    with pytest.raises(ValueError, match="'worker'"):
        CrashInjector({"worker": 1.5})


def test_first_by_crashes_a_role_that_chance_has_spared_on_its_nth_message() -> None:
    injector = CrashInjector({"worker": 1e-9, "scheduler": 1e-9}, first_by=3)
    crashed = [injector("worker-1", Add(amount=i)) for i in range(6)]
    assert crashed == [False, False, True, False, False, False]  # once, then the rate again
    assert not injector("scheduler", Read())  # counts only eligible messages
    assert injector.crashes == {"worker": 1}
    with pytest.raises(ValueError, match="first_by"):
        CrashInjector({"worker": 0.5}, first_by=0)


class FlakyAdder(Counter):
    """Crashes on the first `failures` deliveries of each Add, then adds."""

    def __init__(self, failures: int) -> None:
        super().__init__()
        self.failures = failures
        self.attempts: dict[int, int] = {}

    @handler(Add)
    def add(self, msg: Add) -> int:
        seen = self.attempts.get(msg.amount, 0)
        self.attempts[msg.amount] = seen + 1
        if seen < self.failures:
            raise RuntimeError(f"flaky on {msg.amount}")
        self.total += msg.amount
        return self.total


async def test_redeliver_hands_the_crashed_message_to_the_restarted_actor() -> None:
    async with ActorSystem(lag_interval=None, max_restarts=10) as system:
        adder = system.spawn(lambda: FlakyAdder(2), name="adder", keep_state=True, redeliver=2)
        assert adder.try_tell(Add(amount=1))
        assert await adder.ask(Add(amount=10), timeout=1.0) == 11  # the ask waits through both
        assert await adder.ask(Read(), timeout=1.0) == 11
        assert system.statistics().restarts == 4
        assert system.dead_letters.recent() == []


async def test_a_message_that_crashes_more_than_redeliver_times_is_dead_lettered() -> None:
    async with ActorSystem(lag_interval=None, max_restarts=10) as system:
        adder = system.spawn(lambda: FlakyAdder(9), name="adder", keep_state=True, redeliver=2)
        with pytest.raises(ActorCrashedError):
            await adder.ask(Add(amount=5), timeout=1.0)
        assert await adder.ask(Read(), timeout=1.0) == 0
        letters = system.dead_letters.recent()
    assert [(d.message_type, d.reason) for d in letters] == [("Add", "crashed")]
    assert system.statistics().restarts == 3


async def test_redelivered_injected_crashes_lose_nothing() -> None:
    injector = CrashInjector({"tally": 0.2}, seed=5, spare=(Read,))
    async with ActorSystem(
        lag_interval=None, max_restarts=1_000, fault_injector=injector
    ) as system:
        tally = system.spawn(Counter, name="tally", keep_state=True, redeliver=8, mailbox_size=512)
        for _ in range(300):
            await tally.tell(Add(amount=1))
        assert await tally.ask(Read(), timeout=5.0) == 300
        assert system.dead_letters.recent() == []
    assert injector.crashes["tally"] > 0
