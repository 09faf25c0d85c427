"""A Docker daemon restart always ends with a daemon that answers, even when the run that asked
for it ends first (a CI run once lost its daemon this way: the restart was cancelled while the
old daemon was still stopping, and nothing started the new one)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

import anyio
import pytest

from roost.chaos import docker_daemon
from roost.chaos.docker_daemon import DockerRestartError, restart_docker_daemon
from sandboxes._docker_calls import docker_client

IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")
pytestmark = pytest.mark.anyio
SOCKET = Path("/var/run/docker.sock")


@pytest.fixture
def anyio_backend() -> Any:
    return ("asyncio", {})


async def _answers() -> bool:
    docker = docker_client()
    try:
        with anyio.fail_after(10):
            await docker.version()
        return True
    finally:
        await docker.close()


async def test_a_cancelled_restart_still_brings_the_daemon_back() -> None:
    if shutil.which("dockerd") is None or os.geteuid() != 0:
        if IN_CI:
            pytest.fail("the daemon restart test needs root and dockerd in CI")
        pytest.skip("needs root and dockerd")
    assert await _answers()
    signalled = anyio.Event()
    with anyio.CancelScope() as scope:
        async with anyio.create_task_group() as group:

            async def restart() -> None:
                await restart_docker_daemon()

            group.start_soon(restart)
            # The socket disappears as soon as the daemon takes the signal; cancel then.
            with anyio.fail_after(30):
                while SOCKET.exists():  # noqa: ASYNC110, ASYNC240 - a stat, microseconds
                    await anyio.sleep(0.02)
            signalled.set()
            scope.cancel()
    assert signalled.is_set()
    # The shielded restart finished inside the cancelled scope: the daemon is back now.
    assert await _answers()


_FAKE_PID = 2**22 + 7  # above the default pid_max: never a real process


def _fake_kill(error: type[OSError], real: Any) -> Any:
    def kill(pid: int, sig: int) -> None:
        if pid != _FAKE_PID:
            real(pid, sig)
            return
        raise error(f"fake {error.__name__}")

    return kill


async def test_a_restart_without_permission_is_a_restart_error_not_a_crash(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Not root (only in the docker group): the run records a failed restart
    # (`restart_docker_failed`), which it can only do if the failure is a DockerRestartError.
    monkeypatch.setattr(docker_daemon, "_dockerd", lambda: (_FAKE_PID, ["/usr/bin/dockerd"]))
    monkeypatch.setattr(os, "kill", _fake_kill(PermissionError, os.kill))
    with pytest.raises(DockerRestartError, match="needs root"):
        await restart_docker_daemon()


async def test_a_daemon_gone_before_the_signal_is_still_brought_back(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    brought_back: list[tuple[int, list[str]]] = []

    async def bring_back(pid: int, argv: list[str]) -> None:
        brought_back.append((pid, argv))

    monkeypatch.setattr(docker_daemon, "_dockerd", lambda: (_FAKE_PID, ["/usr/bin/dockerd"]))
    monkeypatch.setattr(docker_daemon, "_bring_back", bring_back)
    monkeypatch.setattr(os, "kill", _fake_kill(ProcessLookupError, os.kill))
    await restart_docker_daemon()
    assert brought_back == [(_FAKE_PID, ["/usr/bin/dockerd"])]
