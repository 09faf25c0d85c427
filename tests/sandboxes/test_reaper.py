"""`reap` against a fake daemon, on the virtual clock: deletes run concurrently (bounded) and the
whole reap has one deadline, however the daemon behaves (the real daemon: test_docker.py)."""

from __future__ import annotations

import math
from typing import Any, cast

import aiodocker
import anyio
import pytest
from structlog.testing import capture_logs

from runtime.clock import VirtualClockEventLoop
from sandboxes._docker_calls import DAEMON_TIMEOUT_S
from sandboxes._reaper import (
    OWNER,
    OWNER_LABEL,
    REAP_CONCURRENCY,
    REAP_DEADLINE_S,
    RUN_LABEL,
    reap,
)

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(60)]


@pytest.fixture
def anyio_backend() -> Any:
    return ("asyncio", {"loop_factory": VirtualClockEventLoop})


class FakeDaemon:
    """Lists `count` containers of run "r1"; each delete takes `delete_s` (inf: never answers)."""

    def __init__(self, count: int, *, delete_s: float) -> None:
        self.delete_s = delete_s
        self.deleting = self.peak = 0
        self.deleted: list[str] = []
        self.found = [FakeContainer(self, f"roost-{n:02d}") for n in range(count)]
        self.containers = self

    async def list(self, *, all: bool, filters: str) -> list[FakeContainer]:
        return self.found


class FakeContainer(dict[str, Any]):
    def __init__(self, daemon: FakeDaemon, name: str) -> None:
        super().__init__(Names=[f"/{name}"], Labels={OWNER_LABEL: OWNER, RUN_LABEL: "r1"})
        self.daemon = daemon
        self.id = name

    async def delete(self, *, force: bool) -> None:
        daemon = self.daemon
        daemon.deleting += 1
        daemon.peak = max(daemon.peak, daemon.deleting)
        try:
            if math.isinf(daemon.delete_s):
                await anyio.sleep_forever()
            await anyio.sleep(daemon.delete_s)
        finally:
            daemon.deleting -= 1
        daemon.deleted.append(self.id)


async def test_reap_deletes_concurrently_but_never_more_than_the_bound() -> None:
    daemon = FakeDaemon(20, delete_s=1.0)
    began = anyio.current_time()
    removed = await reap(cast(aiodocker.Docker, daemon), run_id="r1", expired=False)
    assert sorted(removed) == [f"roost-{n:02d}" for n in range(20)]
    assert daemon.peak == REAP_CONCURRENCY
    assert anyio.current_time() - began == pytest.approx(math.ceil(20 / REAP_CONCURRENCY))


async def test_a_daemon_that_hangs_on_deletes_cannot_hold_reap_past_its_deadline() -> None:
    # One by one, 20 hung deletes would take 20 x 30 s; the whole reap gets REAP_DEADLINE_S.
    assert REAP_DEADLINE_S > DAEMON_TIMEOUT_S  # so some deletes time out on their own first
    daemon = FakeDaemon(20, delete_s=math.inf)
    began = anyio.current_time()
    with capture_logs() as logs:
        removed = await reap(cast(aiodocker.Docker, daemon), run_id="r1", expired=False)
    assert anyio.current_time() - began == pytest.approx(REAP_DEADLINE_S)
    assert removed == []
    timed_out = [e["container"] for e in logs if e["event"] == "reaper.remove_failed"]
    assert len(timed_out) == REAP_CONCURRENCY  # the first eight, at DAEMON_TIMEOUT_S
    (passed,) = [e for e in logs if e["event"] == "reaper.deadline_passed"]
    assert passed["listed"] is True
    assert len(passed["left_behind"]) == 20 - REAP_CONCURRENCY
    assert not set(passed["left_behind"]) & set(timed_out)


async def test_a_short_deadline_leaves_the_slow_deletes_and_keeps_the_quick_ones() -> None:
    daemon = FakeDaemon(3, delete_s=math.inf)
    daemon.found.append(quick := FakeContainer(FakeDaemon(0, delete_s=0.5), "roost-quick"))
    with capture_logs() as logs:
        removed = await reap(
            cast(aiodocker.Docker, daemon), run_id="r1", expired=False, deadline_s=2.0
        )
    assert removed == [quick.id]
    (passed,) = [e for e in logs if e["event"] == "reaper.deadline_passed"]
    assert passed["left_behind"] == ["roost-00", "roost-01", "roost-02"]
