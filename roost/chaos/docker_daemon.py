"""Restart the Docker daemon under a running experiment (chaos mode).

Every container stops with the daemon (no live-restore), so every sandbox of a Docker backend
dies at once and creations fail until the daemon answers again: the hardest infrastructure
fault a run on one host can meet. The daemon is restarted with the command line it runs with,
which needs root, as starting it did (scripts/real_parts.sh).
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
from pathlib import Path

import aiodocker
import anyio
import anyio.to_thread
import structlog

from sandboxes._docker_calls import docker_client
from sandboxes._errors import DaemonError

__all__ = ["DockerRestartError", "restart_docker_daemon"]

_log = structlog.get_logger("roost.chaos")
STOP_TIMEOUT_S = 30.0
ANSWER_TIMEOUT_S = 90.0
SPAWN_TIMEOUT_S = 10.0
LOG_PATH = Path(os.environ.get("ROOST_DOCKERD_LOG", "/var/log/roost-dockerd.log"))


class DockerRestartError(RuntimeError):
    """The daemon could not be found, stopped, or brought back in time."""


def _dockerd() -> tuple[int, list[str]]:
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if argv and Path(argv[0].decode(errors="replace")).name == "dockerd":
            args = [a.decode() for a in argv if a]
            # The binary itself, not argv[0]: that may be a bare name and this process's
            # PATH need not be the one the daemon was started with.
            with contextlib.suppress(OSError):
                args[0] = os.readlink(entry / "exe")
            return int(entry.name), args
    raise DockerRestartError("no dockerd process is running")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return Path(f"/proc/{pid}").exists() and "zombie" not in _state(pid)


def _state(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/status").read_text().split("State:")[1].split("\n")[0].lower()
    except (OSError, IndexError):
        return "zombie"


async def restart_docker_daemon() -> float:
    """Stop dockerd (SIGTERM, then SIGKILL), start it again with the same arguments, and wait
    until it answers; returns the seconds the daemon was unavailable.

    Once the daemon is signalled the restart is shielded from cancellation: a run that ends
    while the old daemon is still stopping (it waits up to 10 s for each container) must not
    leave the host without a daemon. Its own deadlines bound it.

    :raises DockerRestartError: no daemon, no permission to signal it (not root), or it did
        not come back within the deadlines.
    """
    pid, argv = await anyio.to_thread.run_sync(_dockerd)
    started = anyio.current_time()
    _log.warning("chaos.docker_restart", pid=pid, argv=argv)
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        pass  # it ended on its own since we found it: bringing it back is all there is to do
    except PermissionError:
        # Not root (e.g. only in the docker group): a failed restart the run records, not an
        # exception that ends the run.
        raise DockerRestartError(
            f"not permitted to signal dockerd (pid {pid}); restarting it needs root"
        ) from None
    with anyio.CancelScope(shield=True):
        await _bring_back(pid, argv)
    down = anyio.current_time() - started
    _log.warning("chaos.docker_back", seconds=round(down, 2))
    return down


async def _spawn_detached(argv: list[str]) -> None:
    """Start the daemon as init's child, not ours: it outlives this process, which must neither
    reap it nor hold a handle to it. A shell starts it in the background and exits at once."""
    try:
        with anyio.fail_after(SPAWN_TIMEOUT_S):
            with LOG_PATH.open("ab") as log:  # noqa: ASYNC230 - opening a log file, microseconds
                await anyio.run_process(
                    ["/bin/sh", "-c", '"$@" </dev/null &', "sh", *argv],
                    stdout=log,
                    stderr=log,
                    start_new_session=True,
                )
    except (OSError, TimeoutError, subprocess.CalledProcessError) as exc:
        raise DockerRestartError(f"could not start {argv[0]}: {exc}") from exc


async def _wait_gone(pid: int) -> None:
    with anyio.move_on_after(STOP_TIMEOUT_S):
        # Waiting for a process that is not our child: its /proc entry is all there is to watch.
        while _alive(pid):  # noqa: ASYNC110
            await anyio.sleep(0.1)


async def _bring_back(pid: int, argv: list[str]) -> None:
    await _wait_gone(pid)
    if _alive(pid):
        with contextlib.suppress(ProcessLookupError):  # it may end between the two calls
            os.kill(pid, signal.SIGKILL)
        await _wait_gone(pid)
    await _spawn_detached(argv)
    with anyio.move_on_after(ANSWER_TIMEOUT_S) as waiting:
        while True:
            try:
                docker = docker_client()
            except DaemonError:  # no socket yet
                await anyio.sleep(0.2)
                continue
            try:
                with anyio.fail_after(5):
                    await docker.version()
                break
            except (aiodocker.DockerError, OSError, TimeoutError):
                await anyio.sleep(0.2)
            finally:
                await docker.close()
    if waiting.cancelled_caught:
        raise DockerRestartError(f"dockerd did not answer within {ANSWER_TIMEOUT_S} s of a restart")
