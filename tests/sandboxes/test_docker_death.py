"""How a container that died under a running exec is read: the program's OOM kill or infra."""

from __future__ import annotations

import signal
from typing import Any

import pytest

from sandboxes import SandboxSpec
from sandboxes._output import CappedBuffer
from sandboxes._spec import MiB
from sandboxes.docker import DockerSandbox
from sandboxes.factory import create_sandbox
from tests.sandboxes.conftest import require_backend

pytestmark = pytest.mark.anyio

KILLED = 128 + signal.SIGKILL


class _DeadContainer:
    """What docker says of a stopped container: `states` in turn, then the last one again."""

    def __init__(self, *states: dict[str, Any]) -> None:
        self.states, self.inspections = list(states), 0

    async def show(self) -> dict[str, Any]:
        state = self.states[min(self.inspections, len(self.states) - 1)]
        self.inspections += 1
        return {"State": state}


def _sandbox(container: _DeadContainer) -> DockerSandbox:
    sandbox = DockerSandbox(SandboxSpec(runtime="python"))
    sandbox._container = container  # type: ignore[assignment]
    return sandbox


async def _died(sandbox: DockerSandbox) -> Any:
    return await sandbox._died_during_exec(CappedBuffer(64), CappedBuffer(64), 0.0)


async def test_dockers_oom_flag_is_waited_for_when_it_trails_the_exit() -> None:
    # Docker sets OOMKilled from an event that can come after the exit (over 5 s once, in a
    # loaded CI run): a SIGKILLed container is asked again until the flag comes.
    container = _DeadContainer(
        {"ExitCode": KILLED, "OOMKilled": False},
        {"ExitCode": KILLED, "OOMKilled": False},
        {"ExitCode": KILLED, "OOMKilled": True},
    )
    sandbox = _sandbox(container)
    result = await _died(sandbox)
    assert result.oom_killed
    assert result.infra_error is None
    assert result.exit_code == KILLED
    assert container.inspections == 3
    assert sandbox.broken is not None


async def test_another_death_is_infra_at_once() -> None:
    # A container that exited by itself (not SIGKILL): nothing to wait for.
    container = _DeadContainer({"ExitCode": 1, "OOMKilled": False})
    sandbox = _sandbox(container)
    result = await _died(sandbox)
    assert not result.oom_killed
    assert result.infra_error is not None
    assert "stopped during an exec (exit 1)" in result.infra_error.message
    assert container.inspections == 1
    assert sandbox.broken is not None


class _Notices:
    """Stands in for `OomNotices`: what the kernel said of the container's memory cgroup."""

    def __init__(self, seen: bool) -> None:
        self._seen = seen

    def seen(self) -> bool:
        return self._seen


async def test_the_kernels_oom_notice_stands_in_for_a_flag_that_never_comes() -> None:
    # Under gVisor docker's flag sometimes never comes (a CI run waited 15 s for it): the
    # eventfd the kernel signalled for the container's memory cgroup answers at once.
    container = _DeadContainer({"ExitCode": KILLED, "OOMKilled": False})
    sandbox = _sandbox(container)
    sandbox._oom_notices = _Notices(seen=True)  # type: ignore[assignment]
    result = await _died(sandbox)
    assert result.oom_killed
    assert result.infra_error is None
    assert container.inspections == 1
    assert sandbox.broken is not None


async def test_a_sigkill_without_any_oom_word_is_infra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("sandboxes.docker.OOM_FLAG_WAIT_S", 0.2)
    container = _DeadContainer({"ExitCode": KILLED, "OOMKilled": False})
    sandbox = _sandbox(container)
    sandbox._oom_notices = _Notices(seen=False)  # type: ignore[assignment]
    result = await _died(sandbox)
    assert not result.oom_killed
    assert result.infra_error is not None
    assert f"exit {KILLED}" in result.infra_error.message
    assert container.inspections > 1


@pytest.fixture
def gvisor() -> None:
    require_backend("gvisor")  # sync: it may start its own event loop to ask dockerd


async def test_a_gvisor_memory_bomb_is_an_oom_kill_without_dockers_flag(
    gvisor: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The real thing with docker's flag hidden, as when it never comes, and the cgroup's
    # counter unreadable, as when it has gone with the container: the kernel's notice
    # alone makes the bomb the program's OOM kill, not infra, and at once rather than at the
    # end of the flag's wait.
    from aiodocker.containers import DockerContainer

    show = DockerContainer.show

    async def show_without_oom_flag(self: DockerContainer, **kwargs: Any) -> Any:
        info = await show(self, **kwargs)
        info.get("State", {})["OOMKilled"] = False
        return info

    monkeypatch.setattr(DockerContainer, "show", show_without_oom_flag)
    # ... and the cgroup's counter read as already gone with the container.
    monkeypatch.setattr("sandboxes.docker.oom_kill_count", lambda path: 0)
    monkeypatch.setattr("sandboxes.docker.OOM_FLAG_WAIT_S", 60.0)  # a failure, not a pass, if used
    spec = SandboxSpec(backend="gvisor", runtime="python", memory=256 * MiB)
    async with create_sandbox(spec) as sandbox:
        result = await sandbox.exec(["python3", "-c", f"b = b'x' * {1024 * MiB}"], timeout=30)
    assert result.oom_killed, result.infra_error
    assert result.infra_error is None
    assert result.duration_s < 30
