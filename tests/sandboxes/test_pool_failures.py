"""SandboxPool when things fail: the pool exits with an error, a reset or `prepare` or factory
raises, the reaper hangs. On the virtual clock, so deadlines are exact and cost no real time."""

from __future__ import annotations

import math
from typing import Any

import anyio
import pytest

from runtime.clock import VirtualClockEventLoop
from runtime.distributions import Distribution
from sandboxes import SandboxConfigError, SandboxFileError, SandboxSpec
from sandboxes._protocol import Sandbox
from sandboxes.pool import SandboxPool
from sandboxes.sim import SimProfile, SimSandbox
from tests.sandboxes.test_pool import Factory, MemorySandbox, _until_idle

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(60)]


@pytest.fixture
def anyio_backend() -> Any:
    return ("asyncio", {"loop_factory": VirtualClockEventLoop})


class SlowReset(MemorySandbox):
    """A reset that says when it began and then takes `reset_s`; a close that takes `close_s`
    (infinite: it hangs)."""

    def __init__(self, *, reset_s: float = 1.0, close_s: float = 0.0) -> None:
        super().__init__()
        self.reset_s = reset_s
        self.close_s = close_s
        self.reset_began = anyio.Event()
        self.close_began = False

    async def reset(self) -> None:
        self.reset_began.set()
        await anyio.sleep(self.reset_s)
        await super().reset()

    async def close(self) -> None:
        self.close_began = True
        if math.isinf(self.close_s):
            await anyio.sleep_forever()
        await anyio.sleep(self.close_s)
        await super().close()


class ClosingSim(SimSandbox):
    """A sim sandbox (no snapshots: `prepare` re-runs on every reset) that records its close."""

    def __init__(self) -> None:
        super().__init__(
            SandboxSpec(backend="sim"),
            profile=SimProfile(start=Distribution.constant(0.0), reset=Distribution.constant(0.0)),
        )
        self.closed = False

    async def close(self) -> None:
        self.closed = True
        await super().close()


class Abort(Exception):
    """The run body's own failure."""


@pytest.mark.parametrize("how", ["error", "cancelled"])
async def test_a_pool_that_exits_early_closes_the_sandboxes_still_resetting(how: str) -> None:
    made: list[SlowReset] = []

    def factory(key: str) -> Sandbox:
        made.append(SlowReset())
        return made[-1]

    pool = SandboxPool(factory, capacity=2)
    with anyio.CancelScope() as outside:  # stands in for Ctrl-C reaching the run
        try:
            async with pool:
                for lease in [pool.lease_nowait("python"), pool.lease_nowait("python")]:
                    await lease.ready()
                    lease.release()  # the resets run in the pool's tasks
                for sandbox in made:
                    await sandbox.reset_began.wait()
                if how == "cancelled":
                    outside.cancel()
                    await anyio.sleep_forever()
                raise Abort("run failed")
        except* Abort:
            pass
    stats = pool.statistics()
    assert [s.closed for s in made] == [True, True]
    assert (stats.total, stats.starting, stats.idle, stats.resets) == (0, 0, 0, 0)
    assert stats.destroyed == 2


async def test_a_close_that_hangs_cannot_hang_an_early_exit() -> None:
    sandbox = SlowReset(close_s=math.inf)
    pool = SandboxPool(lambda key: sandbox, capacity=1, close_timeout=5.0)
    began = anyio.current_time()
    with pytest.raises(ExceptionGroup) as caught:
        async with pool:
            lease = pool.lease_nowait("python")
            await lease.ready()
            lease.release()
            await sandbox.reset_began.wait()
            raise Abort("run failed")
    assert caught.group_contains(Abort)
    assert sandbox.close_began
    assert anyio.current_time() - began == pytest.approx(5.0)
    assert pool.statistics().total == 0


async def test_a_pool_that_exits_with_an_error_still_closes_its_idle_sandboxes() -> None:
    made: list[SlowReset] = []

    def factory(key: str) -> Sandbox:
        made.append(SlowReset(reset_s=0.0, close_s=1.0))  # a close that must await the backend
        return made[-1]

    with pytest.raises(ExceptionGroup) as caught:
        async with SandboxPool(factory, capacity=1) as pool:
            async with pool.lease("python"):
                pass
            await pool.settle()
            assert pool.idle("python") == 1
            raise Abort("run failed")
    assert caught.group_contains(Abort)
    assert made[0].closed


async def test_a_prepare_that_fails_on_reset_destroys_the_sandbox_not_the_pool() -> None:
    made: list[ClosingSim] = []
    calls = 0

    def factory(key: str) -> Sandbox:
        made.append(ClosingSim())
        return made[-1]

    async def prepare(sandbox: Sandbox) -> None:
        nonlocal calls
        calls += 1
        if calls == 2:  # the first reset's re-run (no snapshots on the sim backend)
            raise SandboxFileError("task.py: no such file")
        await sandbox.put_file("task.py", b"print(1)")

    async with SandboxPool(factory, capacity=1, prepare={"python": prepare}) as pool:
        async with pool.lease("python") as first:
            pass
        await pool.settle()
        async with pool.lease("python") as second:
            files = await second.get_file("task.py")
        await pool.settle()
        stats = pool.statistics()
    assert second.id != first.id
    assert made[0].closed
    assert files == b"print(1)"
    assert (stats.quarantined, stats.destroyed, stats.resets) == (1, 1, 1)


async def test_a_warm_start_whose_prepare_fails_costs_its_sandbox_not_the_pool() -> None:
    failed = anyio.Event()

    async def prepare(sandbox: Sandbox) -> None:
        failed.set()
        raise SandboxFileError("task.py: no such file")

    factory = Factory()
    async with SandboxPool(
        factory, capacity=2, min_idle={"python": 1}, prepare={"python": prepare}
    ) as pool:
        await failed.wait()
        await pool.settle()
        stats = pool.statistics()
    assert stats.start_failures >= 1
    assert factory.made[0].closed
    assert stats.total == 0


class StrictFactory(Factory):
    """Refuses keys it does not know, as `create_sandbox` refuses an unknown runtime."""

    def __call__(self, key: str) -> Sandbox:
        if key != "python":
            raise SandboxConfigError(f"unknown runtime {key!r}")
        return super().__call__(key)


async def test_a_factory_that_raises_takes_no_room_and_evicts_nothing() -> None:
    async with SandboxPool(StrictFactory(), capacity=1) as pool:
        async with pool.lease("python"):
            pass
        await pool.settle()
        with pytest.raises(SandboxConfigError, match="unknown runtime 'rust'"):
            pool.lease_nowait("rust")
        stats = pool.statistics()
        assert (stats.total, stats.busy, stats.evictions) == (1, 0, 0)
        assert pool.idle("python") == 1
        with pytest.raises(SandboxConfigError):
            pool.lease_nowait("rust")  # still refused for the factory, not for lack of room
        assert pool.statistics().total == 1


async def test_a_factory_that_raises_while_topping_up_takes_no_room() -> None:
    pool = SandboxPool(StrictFactory(), capacity=2, min_idle={"rust": 1, "python": 1})
    async with pool:
        await _until_idle(pool, "python", 1)
        stats = pool.statistics()
    assert stats.start_failures >= 1
    assert (stats.total, stats.starting) == (1, 0)


async def test_a_reaper_that_hangs_cannot_hold_the_exit_past_its_deadline() -> None:
    class HangingReaper:
        async def at_start(self) -> None:
            pass

        async def at_exit(self) -> None:
            await anyio.sleep_forever()  # a daemon that lists but never answers a delete

    began = anyio.current_time()
    async with SandboxPool(Factory(), capacity=1, reaper=HangingReaper(), reap_timeout=7.0):
        pass
    assert anyio.current_time() - began == pytest.approx(7.0)
