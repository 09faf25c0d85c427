"""SandboxPool's promises, on an in-memory sandbox double (the real backends: test_reset.py)."""

from __future__ import annotations

from collections.abc import Mapping
from types import TracebackType
from typing import Self

import anyio
import anyio.lowlevel
import pytest

from runtime.metrics import MetricsRegistry
from sandboxes import ExecResult, SandboxBrokenError, SandboxSpec
from sandboxes._base import new_sandbox_id
from sandboxes._protocol import Command, Sandbox
from sandboxes.pool import PoolExhaustedError, SandboxPool

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(60)]


class MemorySandbox:
    """Files in a dict; `dirty` marks what a broken reset would leave behind."""

    def __init__(self, *, fail_start: bool = False, leave_dirt: bool = False) -> None:
        self._id = new_sandbox_id()
        self.files: dict[str, bytes] = {}
        self.pristine: dict[str, bytes] = {}
        self.stray: list[str] = []
        self.started = self.closed = False
        self.closed_event = anyio.Event()
        self.fail_start = fail_start
        self.leave_dirt = leave_dirt
        self.broken: str | None = None
        self.users = 0
        self.resets = 0

    @property
    def id(self) -> str:
        return self._id

    @property
    def spec(self) -> SandboxSpec:
        return SandboxSpec(backend="sim")

    async def start(self) -> None:
        if self.fail_start:
            raise SandboxBrokenError("no start today")
        self.started = True

    async def exec(
        self,
        cmd: Command,
        *,
        stdin: bytes | None = None,
        timeout: float | None = None,
        env: Mapping[str, str] | None = None,
        cwd: str | None = None,
    ) -> ExecResult:
        return ExecResult(exit_code=0)

    async def put_file(self, path: str, data: bytes, *, mode: int = 0o644) -> None:
        self.files[path] = data

    async def get_file(self, path: str) -> bytes:
        return self.files[path]

    async def reset(self) -> None:
        self.resets += 1
        if not self.leave_dirt:
            self.files = dict(self.pristine)
            self.stray = []

    async def validate(self) -> list[str]:
        problems = [f"stray process: {p}" for p in self.stray]
        if self.files != self.pristine:
            problems.append("files differ")
        return problems

    async def snapshot(self) -> bytes:
        return repr(sorted(self.files.items())).encode()

    async def restore(self, archive: bytes) -> None:
        self.files = dict(eval(archive.decode()))  # our own repr, test only
        self.pristine = dict(self.files)

    async def close(self) -> None:
        self.closed = True
        self.closed_event.set()

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()


class Factory:
    def __init__(self, **options: bool) -> None:
        self.made: list[MemorySandbox] = []
        self.options = options

    def __call__(self, key: str) -> Sandbox:
        sandbox = MemorySandbox(**self.options)
        self.made.append(sandbox)
        return sandbox


async def test_concurrent_leases_never_share_a_sandbox() -> None:
    factory = Factory()
    in_use: set[str] = set()
    shared: list[str] = []
    async with SandboxPool(factory, capacity=4) as pool:

        async def user(n: int) -> None:
            for _ in range(25):
                async with pool.lease("python", timeout=30) as sandbox:
                    if sandbox.id in in_use:
                        shared.append(sandbox.id)
                    in_use.add(sandbox.id)
                    await anyio.lowlevel.checkpoint()  # let the other users run while we hold it
                    in_use.discard(sandbox.id)

        async with anyio.create_task_group() as tg:
            for n in range(12):
                tg.start_soon(user, n)
        await pool.settle()
        stats = pool.statistics()
    assert shared == []
    assert len(factory.made) <= 4
    assert stats.warm_hits + stats.cold_starts == 12 * 25
    assert stats.warm_hits > 0


async def test_a_sandbox_that_fails_validation_is_destroyed_and_never_handed_out() -> None:
    factory = Factory(leave_dirt=True)
    async with SandboxPool(factory, capacity=1) as pool:
        async with pool.lease("python") as first:
            await first.put_file("answer.txt", b"42")
        await pool.settle()
        async with pool.lease("python") as second:
            pass
        await pool.settle()
        stats = pool.statistics()
    assert second.id != first.id
    assert factory.made[0].closed
    assert stats.validation_failures >= 1
    assert stats.destroyed >= 1


async def test_a_clean_sandbox_is_reused_after_reset() -> None:
    factory = Factory()
    async with SandboxPool(factory, capacity=1) as pool:
        async with pool.lease("python") as first:
            await first.put_file("answer.txt", b"42")
        await pool.settle()
        async with pool.lease("python") as second:
            seen = dict(second.files)  # type: ignore[attr-defined]
    assert second.id == first.id
    assert seen == {}


async def test_an_infrastructure_error_quarantines_the_sandbox() -> None:
    factory = Factory()
    async with SandboxPool(factory, capacity=1) as pool:
        with pytest.raises(SandboxBrokenError):
            async with pool.lease("python") as first:
                raise SandboxBrokenError("daemon went away")
        async with pool.lease("python") as second:
            pass
        stats = pool.statistics()
    assert second.id != first.id
    assert factory.made[0].closed
    assert factory.made[0].resets == 0
    assert stats.quarantined == 1


async def test_a_sandbox_broken_while_idle_is_replaced_at_hand_out() -> None:
    factory = Factory()
    async with SandboxPool(factory, capacity=2) as pool:
        async with pool.lease("python") as first:
            pass
        await pool.settle()
        factory.made[0].broken = "died while idle"
        async with pool.lease("python") as second:
            pass
    assert second.id != first.id


async def test_lease_waits_for_room_then_gives_up_with_a_clear_error() -> None:
    async with SandboxPool(Factory(), capacity=1) as pool, pool.lease("python"):
        with pytest.raises(PoolExhaustedError, match=r"within 0\.05s"):
            async with pool.lease("python", timeout=0.05):
                pass


async def test_min_idle_keeps_warm_sandboxes_and_replaces_destroyed_ones() -> None:
    factory = Factory()
    async with SandboxPool(factory, capacity=4, min_idle={"python": 2}) as pool:
        await _until_idle(pool, "python", 2)
        lease = pool.lease_nowait("python")
        assert not lease.cold
        lease.release(healthy=False)
        await _until_idle(pool, "python", 2)
        stats = pool.statistics()
    assert stats.starts == 3
    assert stats.quarantined == 1


async def _until_idle(pool: SandboxPool, key: str, count: int) -> None:
    """Wait (woken by the pool's idle callback, never by polling) until `count` are idle."""
    changed = anyio.Event()

    def wake(_key: str) -> None:
        changed.set()

    pool.on_idle(wake)
    with anyio.fail_after(10):
        while pool.idle(key) < count:
            await changed.wait()
            changed = anyio.Event()


async def test_idle_sandboxes_past_the_timeout_are_destroyed() -> None:
    factory = Factory()
    async with SandboxPool(factory, capacity=2, idle_timeout_s=0.05) as pool:
        async with pool.lease("python"):
            pass
        await pool.settle()
        with anyio.fail_after(10):
            await factory.made[0].closed_event.wait()  # the upkeep task destroys it
        stats = pool.statistics()
    assert stats.idle_expired == 1
    assert pool.idle("python") == 0


async def test_starts_are_gated_by_concurrency() -> None:
    running = peak = 0

    class SlowStart(MemorySandbox):
        async def start(self) -> None:
            nonlocal running, peak
            running += 1
            peak = max(peak, running)
            await anyio.sleep(0.01)
            running -= 1

    async with SandboxPool(lambda key: SlowStart(), capacity=6, max_concurrent_starts=2) as pool:
        leases = [pool.lease_nowait("python") for _ in range(6)]
        async with anyio.create_task_group() as tg:
            for lease in leases:
                tg.start_soon(lease.ready)
        for lease in leases:
            lease.release()
    assert peak == 2


async def test_a_failed_start_releases_its_room() -> None:
    async with SandboxPool(Factory(fail_start=True), capacity=1) as pool:
        with pytest.raises(SandboxBrokenError):
            async with pool.lease("python"):
                pass
        stats = pool.statistics()
        assert pool.can_lease("python")
    assert (stats.start_failures, stats.total) == (1, 0)


async def test_prepare_runs_once_per_key_and_every_sandbox_starts_from_it() -> None:
    prepared: list[str] = []

    async def place_task_files(sandbox: Sandbox) -> None:
        prepared.append(sandbox.id)
        await sandbox.put_file("task.py", b"print(1)")

    factory = Factory()
    async with SandboxPool(factory, capacity=3, prepare={"python": place_task_files}) as pool:
        async with pool.lease("python") as a, pool.lease("python") as b:
            await a.put_file("scratch", b"x")
        await pool.settle()
        async with pool.lease("python") as again:
            files = dict(again.files)  # type: ignore[attr-defined]
    assert len(prepared) == 1
    assert b.files == {"task.py": b"print(1)"}  # type: ignore[attr-defined]
    assert files == {"task.py": b"print(1)"}


async def test_metrics_report_acquire_latency_hits_and_occupancy() -> None:
    metrics = MetricsRegistry()
    async with SandboxPool(Factory(), capacity=2, metrics=metrics) as pool:
        for _ in range(3):
            async with pool.lease("python"):
                pass
            await pool.settle()
        snap = metrics.snapshot()
    assert snap["pool.acquire_s"]["count"] == 3
    assert (snap["pool.warm_hits"], snap["pool.cold_starts"]) == (2.0, 1.0)
    assert snap["pool.idle"] == 1.0


async def test_the_reaper_runs_when_the_pool_opens_and_after_it_closed() -> None:
    calls: list[str] = []
    factory = Factory()

    class RecordingReaper:
        async def at_start(self) -> None:
            calls.append("start")

        async def at_exit(self) -> None:
            calls.append(f"exit, all closed={all(s.closed for s in factory.made)}")

    async with (
        SandboxPool(factory, capacity=1, reaper=RecordingReaper()) as pool,
        pool.lease("python"),
    ):
        assert calls == ["start"]
    assert calls == ["start", "exit, all closed=True"]


async def test_a_warm_lease_released_unused_is_reset_for_reuse_not_destroyed() -> None:
    factory = Factory()
    async with SandboxPool(factory, capacity=1) as pool:
        async with pool.lease("python") as first:
            pass
        await pool.settle()
        pool.lease_nowait("python").release()  # e.g. an assignment dropped before it ran
        await pool.settle()
        async with pool.lease("python") as again:
            pass
        stats = pool.statistics()
    assert again.id == first.id
    assert stats.destroyed == 0


async def test_a_sandbox_destroyed_at_capacity_wakes_the_idle_listeners() -> None:
    # A scheduler leases with `lease_nowait` when woken: room freed by a destroyed sandbox must
    # wake it as an idle sandbox would, or a full pool would never start a replacement.
    woken: list[str] = []
    async with SandboxPool(Factory(leave_dirt=True), capacity=1) as pool:
        pool.on_idle(woken.append)
        async with pool.lease("python") as sandbox:
            await sandbox.put_file("scratch", b"x")
        await pool.settle()
        stats = pool.statistics()
        assert pool.can_lease("python")
    assert stats.validation_failures == 1
    assert woken == ["python"]
