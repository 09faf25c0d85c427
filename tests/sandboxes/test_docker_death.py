"""How a container that died under a running exec is read: the program's OOM kill or infra."""

from __future__ import annotations

import signal
from typing import Any

import pytest

from sandboxes import SandboxSpec
from sandboxes._output import CappedBuffer
from sandboxes.docker import DockerSandbox

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
