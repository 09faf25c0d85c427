"""The pool's start gate (`max_concurrent_starts`, `max_starts_per_s`), on the virtual clock.

Under `VirtualClockEventLoop` time only moves when every task waits, so the instants at which
starts begin are exact: the rate limit is checked by those instants, not by a wall clock.
"""

from __future__ import annotations

import itertools
from typing import Any

import anyio
import pytest

from runtime.clock import VirtualClockEventLoop
from sandboxes._pool_parts import StartGate
from sandboxes._protocol import Sandbox
from sandboxes.pool import SandboxPool
from tests.sandboxes.test_pool import MemorySandbox

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(60)]


@pytest.fixture
def anyio_backend() -> Any:
    return ("asyncio", {"loop_factory": VirtualClockEventLoop})


class TimedStarts:
    """A factory whose sandboxes note when each start began and how many ran at once; a start
    takes `start_s` of (virtual) time."""

    def __init__(self, start_s: float = 0.0) -> None:
        self.start_s = start_s
        self.began: list[float] = []
        self.running = self.peak = 0

    def __call__(self, key: str) -> Sandbox:
        factory = self

        class Timed(MemorySandbox):
            async def start(self) -> None:
                factory.began.append(anyio.current_time())
                factory.running += 1
                factory.peak = max(factory.peak, factory.running)
                try:
                    await anyio.sleep(factory.start_s)
                finally:
                    factory.running -= 1
                await super().start()

        return Timed()


async def _start_all(pool: SandboxPool, count: int) -> None:
    leases = [pool.lease_nowait("python") for _ in range(count)]
    async with anyio.create_task_group() as tg:
        for lease in leases:
            tg.start_soon(lease.ready)
    for lease in leases:
        lease.release()


def _gaps(instants: list[float]) -> list[float]:
    ordered = sorted(instants)
    return [round(b - a, 9) for a, b in itertools.pairwise(ordered)]


async def test_a_burst_of_cold_leases_starts_no_faster_than_the_rate() -> None:
    factory = TimedStarts()
    async with SandboxPool(factory, capacity=8, max_starts_per_s=4) as pool:
        t0 = anyio.current_time()
        await _start_all(pool, 8)
        elapsed = anyio.current_time() - t0
        stats = pool.statistics()
    assert stats.starts == 8
    assert _gaps(factory.began) == [0.25] * 7  # one start every 1/4 s, the first at once
    assert factory.began[0] == t0
    assert elapsed == pytest.approx(7 * 0.25)


async def test_without_a_rate_limit_a_burst_starts_at_once() -> None:
    factory = TimedStarts()
    async with SandboxPool(factory, capacity=8) as pool:
        await _start_all(pool, 8)
    assert _gaps(factory.began) == [0.0] * 7


async def test_starts_in_any_one_second_never_exceed_the_rate() -> None:
    factory = TimedStarts(start_s=0.3)
    async with SandboxPool(factory, capacity=20, max_starts_per_s=5) as pool:
        await _start_all(pool, 20)
    began = sorted(factory.began)
    # Every one-second window that opens at a start instant holds at most 5 starts (less a
    # microsecond: the gate's instants are sums of 1/5, which floats round).
    worst = max(sum(1 for u in began if t <= u < t + 1.0 - 1e-6) for t in began)
    assert worst == 5


async def test_an_idle_gate_does_not_bank_a_burst() -> None:
    gate = StartGate(concurrency=None, per_second=2)
    began: list[float] = []

    async def start() -> None:
        async with gate.slot():
            began.append(anyio.current_time())

    await start()
    await anyio.sleep(10)  # idle far longer than the interval: no credit builds up
    async with anyio.create_task_group() as tg:
        for _ in range(3):
            tg.start_soon(start)
    assert _gaps(began[1:]) == [0.5, 0.5]
    assert began[1] - began[0] == pytest.approx(10)


async def test_concurrency_and_rate_limits_hold_together() -> None:
    factory = TimedStarts(start_s=2.0)
    async with SandboxPool(
        factory, capacity=6, max_concurrent_starts=2, max_starts_per_s=10
    ) as pool:
        await _start_all(pool, 6)
    assert factory.peak == 2
    # Two slots of 2 s each: the third start waits for the first to finish, not for the rate.
    assert sorted(factory.began) == pytest.approx([0.0, 0.1, 2.0, 2.1, 4.0, 4.1], abs=1e-6)


async def test_the_gate_records_how_long_each_start_waited() -> None:
    gate = StartGate(concurrency=1, per_second=4)
    async with anyio.create_task_group() as tg:
        for _ in range(3):
            tg.start_soon(_enter, gate)
    assert gate.latency.count == 3
    assert gate.latency.percentile(1.0) == pytest.approx(0.5)


async def _enter(gate: StartGate) -> None:
    async with gate.slot():
        pass


@pytest.mark.parametrize(
    ("options", "field"),
    [
        ({"concurrency": 0, "per_second": None}, "max_concurrent_starts"),
        ({"concurrency": None, "per_second": 0.0}, "max_starts_per_s"),
        ({"concurrency": None, "per_second": -1.0}, "max_starts_per_s"),
    ],
)
def test_invalid_start_limits_name_the_option(options: dict[str, Any], field: str) -> None:
    with pytest.raises(ValueError, match=field):
        StartGate(**options)
