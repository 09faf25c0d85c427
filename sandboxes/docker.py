"""The `docker` backend: one long-lived container per sandbox, its exec helper inside.

How a command runs: the exec helper (`_helper_main.py`, started once per container by one
attached `docker exec` as the sandbox user) forks and execs it on request, streams its output
back, and when it ends or times out kills every other process in the container (a /proc scan;
not `kill(-1)`, which gVisor turns on PID 1). So nothing outlives its exec, as on the process
backend, and a command pays no `docker exec` round trip.

When the helper is lost (it died, the stream broke, an exec was cancelled), every process but
PID 1 is killed: SIGUSR1 to roost's init (`_runtimes.INIT_PY`) needs no new process, so it works
even while a fork bomb holds every pid; a short sweeper exec confirms nothing is left. A new
helper is opened at the next call.

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
import structlog
from aiodocker.containers import DockerContainer
from aiodocker.execs import Exec
from aiodocker.stream import Stream

from sandboxes._cgroup import oom_kill_count
from sandboxes._docker_calls import daemon_call, docker_client
from sandboxes._docker_config import container_config, memory_events_file
from sandboxes._docker_exec import SWEEP, StreamTransport
from sandboxes._errors import (
    BackendUnavailableError,
    DaemonError,
    SandboxBrokenError,
    SandboxConfigError,
    SandboxInfraError,
    SandboxStartError,
)
from sandboxes._helper import HELPER_ARGV, Helper, HelperLostError, RunReply
from sandboxes._helper_sandbox import HelperSandbox
from sandboxes._oom_notice import OomNotices
from sandboxes._output import CappedBuffer
from sandboxes._runtimes import image_tag
from sandboxes._spec import ExecResult, SandboxSpec

HELPER_START_TIMEOUT_S = 60.0
STREAM_CLOSE_S = 10.0  # closing an attach stream or a client: local, but never unbounded
# Exit 0 when process $1 is stopped (state T or t in /proc/$1/stat).
_STOPPED_PROBE = (
    'read -r st < "/proc/$1/stat" || exit 2; case ${st##*) } in [Tt]*) exit 0 ;; esac; exit 1'
)
KILL_GRACE_S = 10.0
EXIT_WAIT_S = 2.0  # how long docker may take to record the exit status of a lost helper
OOM_FLAG_WAIT_S = 15.0  # how long docker may take to record that a dead container was OOM-killed
OOM_NOTICE_SETTLE_S = 1.0  # how long the kernel may take to signal a removed cgroup's eventfd

log = structlog.get_logger(__name__)


class DockerSandbox(HelperSandbox):
    """A `Sandbox` in a Docker container (runc by default; `GVisorSandbox` uses runsc).

    Pass `docker` to share one client among many sandboxes; otherwise each opens and closes its
    own. `runtime` is the OCI runtime name registered with dockerd.
    """

    oci_runtime = "runc"
    watch_during_exec = False

    def __init__(self, spec: SandboxSpec, *, docker: aiodocker.Docker | None = None) -> None:
        super().__init__(spec)
        self._docker = docker
        self._owns_client = docker is None
        self._container: DockerContainer | None = None
        self._oom_file: Path | None = None
        self._oom_notices: OomNotices | None = None
        self._helper_stream: Stream | None = None
        self._helper_exec: Exec | None = None

    @property
    def container_name(self) -> str:
        return f"roost-{self._id}"

    async def _start(self) -> None:
        if self._docker is None:
            self._docker = docker_client()
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
        if self.watch_during_exec and self._oom_file is not None:
            # Where the whole container can die of an OOM (gVisor), keep the kernel's word
            # for it: the cgroup and its counter go with the container.
            self._oom_notices = OomNotices.register(self._oom_file)
        await self._open_first_helper()

    def _oom_kills(self) -> int:
        counted = oom_kill_count(self._oom_file) if self._oom_file is not None else 0
        # The counter goes with the cgroup, tens of milliseconds after a gVisor container's
        # OOM death; the kernel's notice stays.
        return max(counted, int(self._kernel_saw_oom()))

    async def _open_helper(self) -> Helper:
        assert self._container is not None
        execution = await self._create_exec(
            HELPER_ARGV, stdin=True, env=self._environment(None), cwd=self._spec.workdir
        )
        stream = execution.start(detach=False)
        transport = StreamTransport(stream)
        self._helper_stream = stream
        self._helper_exec = execution
        helper = Helper(transport)
        try:
            async with daemon_call("attach exec helper"):
                await stream.__aenter__()
            with anyio.fail_after(HELPER_START_TIMEOUT_S):
                await helper.hello()
        except (TimeoutError, HelperLostError):
            with anyio.CancelScope(shield=True):
                await self._drop_helper()
            detail = transport.stderr.value().decode(errors="replace").strip()[-500:]
            raise SandboxStartError(f"the exec helper did not start: {detail}") from None
        return helper

    async def _drop_helper(self) -> None:
        stream, self._helper_stream = self._helper_stream, None
        self._helper_exec = None
        if self._helper is not None:
            self._helper.alive = False
        if stream is None:
            return
        with contextlib.suppress(Exception), anyio.move_on_after(STREAM_CLOSE_S):
            await stream.close()
        if self._container is None or self._broken is not None:
            return
        try:
            await self._kill_everything()
        except SandboxInfraError as exc:
            self._mark_broken(f"cannot kill the processes of a lost exec helper: {exc}")

    async def _run_via(
        self,
        helper: Helper,
        argv: list[str],
        stdin: bytes | None,
        env: dict[str, str],
        cwd: str,
        timeout: float,
        out: CappedBuffer,
        err: CappedBuffer,
    ) -> RunReply:
        if not self.watch_during_exec:
            return await helper.run(
                argv, stdin=stdin, env=env, cwd=cwd, timeout=timeout, out=out, err=err
            )
        reply: RunReply | None = None
        lost: HelperLostError | None = None
        async with anyio.create_task_group() as tg:

            async def watch() -> None:
                # Under gVisor a container that dies mid-exec (the host OOM killer takes the
                # whole sentry) leaves the exec stream open forever.
                if await self._wait_stopped():
                    tg.cancel_scope.cancel()

            tg.start_soon(watch)
            try:
                reply = await helper.run(
                    argv, stdin=stdin, env=env, cwd=cwd, timeout=timeout, out=out, err=err
                )
            except HelperLostError as exc:
                lost = exc  # raised below, not wrapped in the task group's exception group
            tg.cancel_scope.cancel()
        if lost is not None:
            raise lost
        if reply is None:
            helper.alive = False
            raise HelperLostError("the container stopped during an exec")
        return reply

    async def _helper_lost(
        self, exc: SandboxInfraError, out: CappedBuffer, err: CappedBuffer, started: float
    ) -> ExecResult:
        try:
            running = await self._is_running()
        except SandboxInfraError:
            running = True
        if not running:
            return await self._died_during_exec(out, err, started)
        return ExecResult.infra(exc, duration_s=time.monotonic() - started)

    async def _helper_exit_status(self) -> int | None:
        """The helper exec's exit code as docker records it (128+N for signal N), read while
        the container still runs (`_helper_lost` has checked); None if docker cannot tell."""
        execution = self._helper_exec
        if execution is None:
            return None
        code: int | None = None
        try:
            with anyio.move_on_after(EXIT_WAIT_S):
                while code is None:
                    async with daemon_call("inspect exec helper"):
                        info = await execution.inspect()
                    if not info.get("Running") and info.get("ExitCode") is not None:
                        code = int(info["ExitCode"])
                    else:
                        await anyio.sleep(0.01)
            # A container killed from outside takes its helper with it: asked again after the
            # helper's exit was recorded, docker knows whether the container went too.
            if code is not None and not await self._is_running():
                return None
        except SandboxInfraError:
            return None
        return code

    async def _helper_stopped(self) -> bool:
        """Read the helper's state in /proc through a side exec (as the sandbox user)."""
        if self._helper is None or self._container is None:
            return False
        try:
            probe = await self._create_exec(
                ["/bin/sh", "-c", _STOPPED_PROBE, "roost-probe", str(self._helper.pid)],
                stdin=False,
                env={},
                cwd="/",
            )
            async with daemon_call("run helper probe"):
                await probe.start(detach=True)
            return await self._wait_exec(probe) == 0
        except SandboxInfraError:
            return False

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
        # Docker records OOMKilled from a separate event that can trail the exit, and now and
        # then never comes (a loaded CI run waited 15 s for one under gVisor). A SIGKILLed
        # container (137) is worth asking again before calling it infra, unless the kernel's
        # own OOM notice for its memory cgroup (`_oom_notice`, v1) has already said so. The
        # wait costs only deaths by SIGKILL without either word, which are rare.
        oom = False
        with anyio.move_on_after(OOM_FLAG_WAIT_S):
            while True:
                async with daemon_call("inspect dead container"):
                    state = (await self._container.show()).get("State", {})
                oom = bool(state.get("OOMKilled")) or self._kernel_saw_oom()
                if oom or state.get("ExitCode") != 128 + signal.SIGKILL:
                    break
                await anyio.sleep(0.05)
        duration = time.monotonic() - started
        if oom:
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
        log.warning(  # what docker said, for the day the flag never comes
            "container_died_during_exec",
            exit_code=state.get("ExitCode"),
            oom_killed=state.get("OOMKilled"),
            error=state.get("Error"),
        )
        self._mark_broken(reason)
        return ExecResult.infra(SandboxBrokenError(reason), duration_s=duration)

    def _kernel_saw_oom(self) -> bool:
        return self._oom_notices is not None and self._oom_notices.seen()

    async def _settle_oom(self) -> None:
        notices = self._oom_notices
        if notices is None:
            return
        with anyio.move_on_after(OOM_NOTICE_SETTLE_S):
            while True:  # a kernel counter to poll, no event to wait on
                if not notices.undecided():
                    return
                await anyio.sleep(0.01)

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

    async def _close(self) -> None:
        with contextlib.suppress(Exception), anyio.move_on_after(STREAM_CLOSE_S):
            if self._helper_stream is not None:
                await self._helper_stream.close()
        self._helper_stream = None
        if self._oom_notices is not None:
            self._oom_notices.close()
            self._oom_notices = None
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
            with contextlib.suppress(Exception), anyio.move_on_after(STREAM_CLOSE_S):
                await docker.close()


class GVisorSandbox(DockerSandbox):
    """The docker backend with gVisor's `runsc` runtime: a user-space kernel between the program
    and the host. For untrusted work; syscall-heavy programs are much slower (ptrace platform)."""

    oci_runtime = "runsc"
    watch_during_exec = True
