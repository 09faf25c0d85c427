"""How a container that died under a running exec is read: the program's OOM kill or infra."""

from __future__ import annotations

import signal
from pathlib import Path
from typing import Any

import pytest

from sandboxes import SandboxSpec
from sandboxes._output import CappedBuffer
from sandboxes.docker import DockerSandbox

pytestmark = pytest.mark.anyio

KILLED = 128 + signal.SIGKILL


class _DeadContainer:
    """What docker says of a stopped container: its state, the same at every inspect."""

    def __init__(self, state: dict[str, Any]) -> None:
        self.state, self.inspections = state, 0

    async def show(self) -> dict[str, Any]:
        self.inspections += 1
        return {"State": self.state}


def _sandbox(state: dict[str, Any], oom_file: Path | None) -> tuple[DockerSandbox, _DeadContainer]:
    sandbox = DockerSandbox(SandboxSpec(runtime="python"))
    container = _DeadContainer(state)
    sandbox._container = container  # type: ignore[assignment]
    sandbox._oom_file = oom_file
    return sandbox, container


async def _died(sandbox: DockerSandbox) -> Any:
    return await sandbox._died_during_exec(CappedBuffer(64), CappedBuffer(64), 0.0)


async def test_the_cgroups_oom_count_answers_before_dockers_flag(tmp_path: Path) -> None:
    # Docker's OOMKilled trails the exit (it once took over 5 s under a loaded CI run); the
    # cgroup's own count says so at once, with no wait for the flag.
    events = tmp_path / "memory.oom_control"
    events.write_text("oom_kill_disable 0\nunder_oom 0\noom_kill 1\n")
    sandbox, container = _sandbox({"ExitCode": KILLED, "OOMKilled": False}, events)
    result = await _died(sandbox)
    assert result.oom_killed
    assert result.infra_error is None
    assert container.inspections == 1
    assert sandbox.broken is not None


async def test_dockers_flag_alone_marks_an_oom_kill() -> None:
    sandbox, _ = _sandbox({"ExitCode": KILLED, "OOMKilled": True}, None)
    result = await _died(sandbox)
    assert result.oom_killed
    assert result.exit_code == KILLED


async def test_another_death_is_infra_at_once(tmp_path: Path) -> None:
    # A container that exited by itself (not SIGKILL): nothing to wait for.
    events = tmp_path / "memory.oom_control"
    events.write_text("oom_kill 0\n")
    sandbox, container = _sandbox({"ExitCode": 1, "OOMKilled": False}, events)
    result = await _died(sandbox)
    assert not result.oom_killed
    assert result.infra_error is not None
    assert "stopped during an exec (exit 1)" in result.infra_error.message
    assert container.inspections == 1
