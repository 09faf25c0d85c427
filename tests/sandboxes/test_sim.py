"""The sim backend: seeded, process-free, and cheap enough for thousands under a virtual clock."""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from runtime.clock import VirtualClockEventLoop
from runtime.distributions import Distribution
from sandboxes import (
    ExecResult,
    SandboxFileError,
    SandboxSpec,
    SandboxStartError,
    UnsafePathError,
    create_sandbox,
)
from sandboxes.sim import SimProfile, SimSandbox

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(30)]
SIM = SandboxSpec(backend="sim")


@pytest.fixture
def anyio_backend() -> Any:
    # The sim backend only sleeps through anyio, so the virtual clock makes these tests instant.
    return ("asyncio", {"loop_factory": VirtualClockEventLoop})


async def _durations(seed: int) -> list[float]:
    async with SimSandbox(SIM, seed=seed) as sb:
        return [(await sb.exec(["true"])).duration_s for _ in range(20)]


async def test_same_seed_gives_the_same_latencies() -> None:
    assert await _durations(7) == await _durations(7)
    assert await _durations(7) != await _durations(8)


async def test_thousands_of_sandboxes_run_concurrently_in_virtual_time() -> None:
    done = 0

    async def one(seed: int) -> None:
        nonlocal done
        async with create_sandbox(SIM, seed=seed) as sb:
            assert (await sb.exec("echo hi")).ok
            done += 1

    start = anyio.current_time()
    async with anyio.create_task_group() as tg:
        for seed in range(2000):
            tg.start_soon(one, seed)
    assert done == 2000
    assert anyio.current_time() - start < 5  # virtual seconds: they overlapped


async def test_faults_follow_the_profile() -> None:
    broken = SimProfile(exec_infra_failure_rate=1.0)
    async with SimSandbox(SIM, profile=broken) as sb:
        first = await sb.exec(["true"])
        second = await sb.exec(["true"])
    assert first.infra_error is not None
    assert second.infra_error is not None

    with pytest.raises(SandboxStartError):
        await SimSandbox(SIM, profile=SimProfile(start_failure_rate=1.0)).start()

    slow = SimProfile(exec=Distribution("constant", value=5.0))
    async with SimSandbox(SIM, profile=slow) as sb:
        timed_out = await sb.exec(["true"], timeout=1.0)
    assert timed_out.timed_out
    assert timed_out.exit_code is None


async def test_responder_scripts_results_and_files_follow_the_path_rules() -> None:
    def respond(argv: list[str], stdin: bytes | None) -> ExecResult:
        return ExecResult(exit_code=0, stdout=(stdin or b"").upper())

    async with SimSandbox(SIM, responder=respond) as sb:
        assert (await sb.exec(["cat"], stdin=b"abc")).stdout == b"ABC"
        await sb.put_file("a/b.txt", b"data")
        assert await sb.get_file("a/b.txt") == b"data"
        with pytest.raises(UnsafePathError):
            await sb.put_file("../escape", b"")
        await sb.reset()
        with pytest.raises(SandboxFileError):
            await sb.get_file("a/b.txt")
