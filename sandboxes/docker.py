"""The `docker` backend: one long-lived container per sandbox, one `docker exec` per command.

How a command runs: `sh -c 'env -- "$@"; s=$?; <kill every other process>; exit $s'` as the
sandbox user. The wrapper kills whatever the command left behind once it ends, so nothing outlives
its exec (as on the process backend) and the output stream closes.

How a timeout kills: cancelling an exec stream does not kill the process, and a `docker exec` of a
killer cannot even start when a fork bomb holds every pid. So on timeout we send SIGUSR1 to the
container's PID 1 (roost's init, see `_runtimes.INIT_PY`), which needs no new process and kills
every other process in the container; then a short sweeper exec confirms nothing is left.

Every call to the daemon has a deadline (`daemon_call`); infrastructure failures during an exec
come back as `ExecResult.infra_error`, never as a program failure.
"""

from __future__ import annotations

import contextlib
import signal
import time
from pathlib import Path
from typing import Any

import aiodocker
import aiohttp
import anyio
from aiodocker.containers import DockerContainer
from aiodocker.execs import Exec

from sandboxes._base import BaseSandbox
from sandboxes._cgroup import oom_kill_count
from sandboxes._docker_calls import daemon_call
from sandboxes._docker_config import container_config, memory_events_file
from sandboxes._docker_exec import (
    GVISOR_WRAPPER,
    RESET_SCRIPT,
    SWEEP,
    WRAPPER,
    pump_output,
    send_stdin,
)
from sandboxes._errors import (
    BackendUnavailableError,
    DaemonError,
    SandboxBrokenError,
    SandboxConfigError,
    SandboxInfraError,
)
from sandboxes._output import CappedBuffer
from sandboxes._runtimes import image_tag
from sandboxes._spec import ExecResult, SandboxSpec, status_to_exit

KILL_GRACE_S = 10.0


class DockerSandbox(BaseSandbox):
    """A `Sandbox` in a Docker container (runc by default; `GVisorSandbox` uses runsc).

    Pass `docker` to share one client among many sandboxes; otherwise each opens and closes its
    own. `runtime` is the OCI runtime name registered with dockerd.
    """

    oci_runtime = "runc"
    wrapper = WRAPPER

    def __init__(self, spec: SandboxSpec, *, docker: aiodocker.Docker | None = None) -> None:
        super().__init__(spec)
        self._docker = docker
        self._owns_client = docker is None
        self._container: DockerContainer | None = None
        self._oom_file: Path | None = None

    @property
    def container_name(self) -> str:
        return f"roost-{self._id}"

    async def _start(self) -> None:
        if self._docker is None:
            self._docker = aiodocker.Docker()
        image = self._spec.image or image_tag(self._spec.runtime)
        if self._spec.network and self.oci_runtime == "runsc":
            raise SandboxConfigError("network: the gvisor backend runs without network")
        config = container_config(
            self._spec, sandbox_id=self._id, image=image, runtime=self.oci_runtime
        )
        try:
            async with daemon_call("create container"):
                self._container = await self._docker.containers.create(
                    config, name=self.container_name
                )
        except DaemonError as exc:
            if exc.status == 404:
                raise BackendUnavailableError(
                    f"image {image} is missing; build it with `roost sandbox images`"
                ) from None
            if exc.status == 0:
                raise BackendUnavailableError(str(exc)) from None
            raise
        async with daemon_call("start container"):
            await self._container.start()
        async with daemon_call("inspect container"):
            info = await self._container.show()
        pid = int(info.get("State", {}).get("Pid") or 0)
        # Only readable when dockerd runs on this host and we may read its cgroups.
        self._oom_file = memory_events_file(pid) if pid > 0 else None

    def _oom_kills(self) -> int:
        return oom_kill_count(self._oom_file) if self._oom_file is not None else 0

    async def _run(
        self,
        argv: list[str],
        *,
        stdin: bytes | None,
        timeout: float,
        env: dict[str, str],
        cwd: str,
        output_limit: int,
    ) -> ExecResult:
        started = time.monotonic()
        oom_before = self._oom_kills()
        out, err = CappedBuffer(output_limit), CappedBuffer(output_limit)
        timed_out = False
        try:
            execution = await self._create_exec(
                ["/bin/sh", "-c", self.wrapper, "roost-exec", *argv],
                stdin=stdin is not None,
                env=env,
                cwd=cwd,
            )
            stream = execution.start(detach=False)
            try:
                async with daemon_call("attach exec"):
                    await stream.__aenter__()
                died = False
                with anyio.move_on_after(timeout) as scope:
                    async with anyio.create_task_group() as tg:

                        async def watch() -> None:
                            # Under gVisor a container that dies mid-exec (the host OOM killer
                            # takes the whole sentry) leaves the exec stream open forever.
                            nonlocal died
                            died = await self._wait_stopped()
                            if died:
                                tg.cancel_scope.cancel()

                        tg.start_soon(watch)
                        if stdin is not None:
                            tg.start_soon(send_stdin, stream, stdin)
                        await pump_output(stream, out, err)
                        tg.cancel_scope.cancel()
                if died:
                    return await self._died_during_exec(out, err, started)
                if scope.cancelled_caught:
                    timed_out = True
                    await self._kill_everything()
            finally:
                with anyio.CancelScope(shield=True):
                    await stream.close()
            exit_status = await self._wait_exec(execution)
            if exit_status >= 128 and not await self._is_running():
                # The stream may end before the watcher sees the container stop (gVisor reports
                # a dead sentry as exit 128 with a runsc message on stderr).
                return await self._died_during_exec(out, err, started)
        except SandboxInfraError as exc:
            return ExecResult.infra(exc, duration_s=time.monotonic() - started)
        common: dict[str, Any] = {
            "stdout": out.value(),
            "stderr": err.value(),
            "stdout_truncated": out.truncated,
            "stderr_truncated": err.truncated,
            "duration_s": time.monotonic() - started,
            "oom_killed": self._oom_kills() > oom_before,
        }
        if timed_out:
            return ExecResult(exit_code=None, timed_out=True, signal=int(signal.SIGKILL), **common)
        exit_code, sig = status_to_exit(exit_status)
        return ExecResult(exit_code=exit_code, signal=sig, **common)

    async def _wait_stopped(self) -> bool:
        """Block until the container stops (True); False if the daemon cannot tell us."""
        assert self._container is not None
        try:
            await self._container.wait()
        except (aiodocker.DockerError, aiohttp.ClientError, OSError):
            return False
        return True

    async def _is_running(self) -> bool:
        assert self._container is not None
        async with daemon_call("inspect container"):
            info = await self._container.show()
        return bool(info.get("State", {}).get("Running"))

    async def _died_during_exec(
        self, out: CappedBuffer, err: CappedBuffer, started: float
    ) -> ExecResult:
        """The container stopped under a running exec. If the kernel OOM-killed it, the program
        exceeded its memory (its failure, reported as such); either way the sandbox is gone."""
        assert self._container is not None
        state: dict[str, Any] = {}
        # Docker records OOMKilled from a separate event that can trail the exit by a moment;
        # a SIGKILLed container (137) is worth asking again briefly before calling it infra.
        with anyio.move_on_after(2.0):
            while True:
                async with daemon_call("inspect dead container"):
                    state = (await self._container.show()).get("State", {})
                if state.get("OOMKilled") or state.get("ExitCode") != 128 + signal.SIGKILL:
                    break
                await anyio.sleep(0.05)
        duration = time.monotonic() - started
        if state.get("OOMKilled"):
            self._mark_broken("the container was OOM-killed as a whole")
            return ExecResult(
                exit_code=128 + signal.SIGKILL,
                signal=int(signal.SIGKILL),
                oom_killed=True,
                stdout=out.value(),
                stderr=err.value(),
                stdout_truncated=out.truncated,
                stderr_truncated=err.truncated,
                duration_s=duration,
            )
        reason = f"the container stopped during an exec (exit {state.get('ExitCode')})"
        self._mark_broken(reason)
        return ExecResult.infra(SandboxBrokenError(reason), duration_s=duration)

    async def _create_exec(
        self, argv: list[str], *, stdin: bool, env: dict[str, str], cwd: str
    ) -> Exec:
        assert self._container is not None
        async with daemon_call("create exec"):
            return await self._container.exec(
                argv, stdin=stdin, user=self._spec.user, environment=env, workdir=cwd
            )

    async def _wait_exec(self, execution: Exec) -> int:
        """The exit status once docker has recorded it (it may lag the stream's end slightly)."""
        delay = 0.002
        with anyio.move_on_after(KILL_GRACE_S):
            while True:
                async with daemon_call("inspect exec"):
                    info = await execution.inspect()
                if not info.get("Running") and info.get("ExitCode") is not None:
                    return int(info["ExitCode"])
                await anyio.sleep(delay)
                delay = min(delay * 2, 0.1)
        raise SandboxBrokenError("an exec was still running after its process tree was killed")

    async def _kill_everything(self) -> None:
        """Kill every process in the container but PID 1, and confirm none is left."""
        assert self._container is not None
        async with daemon_call("signal init"):
            await self._container.kill(signal="SIGUSR1")
        # The sweeper needs a free pid; right after the init's kill loop the pids are freed, but
        # retry briefly in case the kernel has not released them yet.
        delay = 0.01
        with anyio.move_on_after(KILL_GRACE_S):
            while True:
                try:
                    sweeper = await self._create_exec(
                        ["/bin/sh", "-c", SWEEP], stdin=False, env={}, cwd="/"
                    )
                    async with daemon_call("run sweeper"):
                        await sweeper.start(detach=True)
                    if await self._wait_exec(sweeper) == 0:
                        return
                except DaemonError:
                    pass
                await anyio.sleep(delay)
                delay = min(delay * 2, 0.5)
        raise SandboxBrokenError("could not confirm that the timed-out processes are gone")

    async def _reset(self) -> None:
        await self._kill_everything()
        execution = await self._create_exec(
            ["/bin/sh", "-c", RESET_SCRIPT, "roost-reset", self._spec.workdir],
            stdin=False,
            env={},
            cwd="/",
        )
        async with daemon_call("run reset"):
            await execution.start(detach=True)
        if await self._wait_exec(execution) != 0:
            raise SandboxBrokenError("the work directory could not be emptied")

    async def _close(self) -> None:
        if self._container is not None:
            container, self._container = self._container, None
            try:
                async with daemon_call("remove container"):
                    await container.delete(force=True)
            except SandboxInfraError as exc:
                # The reaper will find it by its labels; closing must not fail.
                self._log.warning("sandbox.remove_failed", error=str(exc))
        if self._owns_client and self._docker is not None:
            docker, self._docker = self._docker, None
            with contextlib.suppress(Exception):
                await docker.close()


class GVisorSandbox(DockerSandbox):
    """The docker backend with gVisor's `runsc` runtime: a user-space kernel between the program
    and the host. For untrusted work; syscall-heavy programs are much slower (ptrace platform)."""

    oci_runtime = "runsc"
    wrapper = GVISOR_WRAPPER
