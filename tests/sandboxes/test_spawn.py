"""`sandboxes._spawn`: children started by vfork, their pipes and exits watched by the loop."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from typing import Any

import anyio
import pytest

from sandboxes import _spawn
from sandboxes._spawn import run, spawn

pytestmark = pytest.mark.anyio

ECHO_UPPER = "import sys; sys.stdout.buffer.write(sys.stdin.buffer.readline().upper())"
COUNT = "import sys; n = len(sys.stdin.buffer.read(1 << 20)); print(n, flush=True)"


@pytest.fixture(
    params=[
        pytest.param(("asyncio", {"use_uvloop": True}), id="uvloop"),
        pytest.param(("asyncio", {}), id="asyncio"),
    ]
)
def anyio_backend(request: pytest.FixtureRequest) -> Any:
    return request.param


async def read_all(proc: _spawn.SpawnedProcess) -> bytes:
    out = b""
    while chunk := await proc.receive():
        out += chunk
    return out


async def test_child_reads_stdin_and_answers_on_stdout() -> None:
    proc = await spawn([sys.executable, "-c", ECHO_UPPER])
    with anyio.fail_after(30):
        await proc.send(b"hello\n")
        assert await read_all(proc) == b"HELLO\n"
        assert await proc.wait() == 0
    assert proc.returncode == 0
    proc.close_pipes()


async def test_a_send_larger_than_the_pipe_buffer_arrives_whole() -> None:
    proc = await spawn([sys.executable, "-c", COUNT])
    with anyio.fail_after(30):
        await proc.send(b"x" * (1 << 20))  # 16 pipe buffers: the write blocks and resumes
        assert await read_all(proc) == b"1048576\n"
        assert await proc.wait() == 0
    proc.close_pipes()


async def test_wait_reports_the_killing_signal() -> None:
    proc = await spawn(["sleep", "60"], pipes=False, start_new_session=True)
    os.killpg(proc.pid, signal.SIGKILL)
    with anyio.fail_after(30):
        assert await proc.wait() == -signal.SIGKILL


async def test_wait_without_pidfd_falls_back_to_polling(monkeypatch: pytest.MonkeyPatch) -> None:
    def no_pidfd(pid: int) -> int:
        raise OSError("pidfd_open: not supported here")

    monkeypatch.setattr(os, "pidfd_open", no_pidfd)
    proc = await spawn([sys.executable, "-c", "raise SystemExit(3)"], pipes=False)
    with anyio.fail_after(30):
        assert await proc.wait() == 3


async def test_closing_the_pipes_wakes_a_blocked_reader() -> None:
    proc = await spawn(["sleep", "60"], start_new_session=True)
    errors: list[BaseException] = []

    async def reader() -> None:
        try:
            await proc.receive()
        except anyio.ClosedResourceError as exc:
            errors.append(exc)

    with anyio.fail_after(30):
        async with anyio.create_task_group() as tg:
            tg.start_soon(reader)
            await anyio.wait_all_tasks_blocked()
            proc.close_pipes()
        os.killpg(proc.pid, signal.SIGKILL)
        await proc.wait()
    assert len(errors) == 1
    with pytest.raises(OSError, match="stdout is not open"):
        await proc.receive()
    with pytest.raises(OSError, match="stdin is not open"):
        await proc.send(b"late")


async def test_a_missing_program_raises_oserror() -> None:
    with pytest.raises(FileNotFoundError):
        await spawn(["/nonexistent/roost-no-such-program"])


async def test_run_captures_output_and_status() -> None:
    done = await run([sys.executable, "-c", "print('out'); raise SystemExit(2)"], timeout=30)
    assert (done.returncode, done.stdout) == (2, b"out\n")


async def test_run_past_its_timeout_raises() -> None:
    with pytest.raises(subprocess.TimeoutExpired):
        await run(["sleep", "60"], timeout=0.2)
