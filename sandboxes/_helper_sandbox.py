"""`HelperSandbox`: a real backend whose commands run through the exec helper.

The process, docker and gvisor backends keep one helper (`_helper_main.py`) alive in each
sandbox. An exec is one request to it (a fork and an exec inside), a reset is one request (kill
every process, empty the work directory and /tmp, restore the baseline), and `validate` asks it
for the sandbox's processes, files and free space and compares them with what the sandbox looked
like when it was pristine. A subclass says how to open the helper and how to kill it together
with everything it started.

When the helper is lost (it died, broke the protocol, or an exec was cancelled half-way) it is
killed with everything in the sandbox and a new one is opened at the next call.

Who is to blame for a lost helper decides what the caller does next (retry elsewhere, or score
the agent). The helper runs as the sandbox user, so the agent's own command can kill or stop it
(`kill -9 -1`, `kill $PPID`, `kill -STOP -1`). So: a helper that was *killed by a signal*, or
that missed its deadline because it is *stopped*, while a command of the caller's was running
(the helper had said S, starting, and not yet X, ended), in a sandbox that is itself still up,
was signalled by that command. The exec then returns an ordinary result (exit 137, SIGKILL, a
note on stderr): the agent's failure, not an infrastructure one. The sandbox is marked tainted,
so `validate` reports it and a pool destroys it instead of handing it out again. Every other
loss is infrastructure: the helper died with no command running (or during the sandbox's own
file and health-check commands), it crashed (exited with a status, not a signal), the sandbox
itself was killed or stopped, the daemon failed, or the helper stopped answering while running.
"""

from __future__ import annotations

import abc
import json
import signal
import time
from typing import Any

import anyio

from sandboxes._base import BaseSandbox
from sandboxes._errors import SandboxBrokenError, SandboxInfraError
from sandboxes._helper import Helper, HelperExitedError, HelperLostError
from sandboxes._output import CappedBuffer
from sandboxes._spec import ExecResult, status_to_exit

KILL_GRACE_S = 10.0  # past the exec's own timeout, how long the helper may take to answer
CONTROL_TIMEOUT_S = 30.0  # reset, inspect, snapshot and restore
FREE_SPACE_SLACK = 256 * 1024  # tmpfs accounting wobbles by a few pages


class HelperSandbox(BaseSandbox):
    """A `BaseSandbox` whose `_run` and `_reset` go through the exec helper."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._helper: Helper | None = None
        self._pristine: dict[str, Any] | None = None
        self._tainted: str | None = None

    # --- what a backend provides ----------------------------------------------------------

    @abc.abstractmethod
    async def _open_helper(self) -> Helper:
        """Start a helper in the started sandbox and wait for its greeting."""

    @abc.abstractmethod
    async def _drop_helper(self) -> None:
        """Kill the helper and every process in the sandbox (idempotent, never raises)."""

    def _oom_kills(self) -> int:
        return 0

    async def _settle_oom(self) -> None:
        """Wait (briefly, bounded) until `_oom_kills` can tell whether a sandbox that just
        died was OOM-killed; most backends know at once."""

    async def _helper_exit_status(self) -> int | None:
        """How the lost helper ended, as seen inside a sandbox that is still up: the shell-style
        status (128+N when signal N killed it). None when unknown, when it has not ended, or
        when the sandbox itself was killed from outside; called before `_drop_helper`."""
        return None

    async def _helper_stopped(self) -> bool:
        """Whether the helper, which missed its deadline, is stopped (SIGSTOP, SIGTSTP) in a
        sandbox that is still up; called before `_drop_helper`."""
        return False

    @property
    def tainted(self) -> str | None:
        """Why this sandbox can no longer pass as fresh (a command killed or stopped its
        helper), or None. It still runs commands; `validate` reports it."""
        return self._tainted

    def _size_limited_dirs(self) -> list[str]:
        """Writable directories whose free space is the sandbox's own (a tmpfs)."""
        return self._writable_dirs()

    async def _helper_lost(
        self, exc: SandboxInfraError, out: CappedBuffer, err: CappedBuffer, started: float
    ) -> ExecResult:
        """The result of an exec whose helper was lost (a backend may know better)."""
        return ExecResult.infra(exc, duration_s=time.monotonic() - started)

    # --- shared ---------------------------------------------------------------------------

    def _writable_dirs(self) -> list[str]:
        """Every path the sandbox user can write (the root filesystem is read-only on every
        backend): what a reset empties and validation compares; the work directory first."""
        return [self._spec.workdir, "/tmp", "/dev/shm"]

    async def _helper_ready(self) -> Helper:
        if self._helper is None or not self._helper.alive:
            await self._drop_helper()
            self._helper = None
            self._helper = await self._open_helper()
        return self._helper

    async def _run(
        self,
        argv: list[str],
        *,
        stdin: bytes | None,
        timeout: float,
        env: dict[str, str],
        cwd: str,
        output_limit: int,
        agent: bool = False,
    ) -> ExecResult:
        started = time.monotonic()
        out, err = CappedBuffer(output_limit), CappedBuffer(output_limit)
        try:
            helper = await self._helper_ready()
        except SandboxInfraError as exc:
            return ExecResult.infra(exc, duration_s=time.monotonic() - started)
        oom_before = self._oom_kills()
        try:
            with anyio.fail_after(timeout + KILL_GRACE_S):
                reply = await self._run_via(helper, argv, stdin, env, cwd, timeout, out, err)
        except (TimeoutError, HelperLostError) as exc:
            lost = (
                exc
                if isinstance(exc, HelperLostError)
                else HelperLostError(f"the exec helper did not answer within {KILL_GRACE_S}s")
            )
            sent = None
            with anyio.CancelScope(shield=True):
                result = await self._helper_lost(lost, out, err, started)
                if (
                    result.infra_error is not None
                    and self._broken is None
                    and agent
                    and helper.command_running
                ):
                    sent = await self._signal_from_command(exc)
                await self._drop_helper()
                if result.infra_error is not None:
                    await self._settle_oom()
            if result.infra_error is not None and self._oom_kills() > oom_before:
                return _oom_result(out, err, started)  # the kernel took the helper too
            # Cleaning up after the helper proves that the sandbox itself is still up (a dead
            # container cannot run the sweeper): only then can the command be to blame.
            if sent is not None and self._broken is None:
                return self._helper_signalled_by_command(sent, out, err, started)
            return result
        except BaseException:
            # Cancelled half-way: whatever the command started must not keep running.
            with anyio.CancelScope(shield=True):
                await self._drop_helper()
            raise
        if not reply.clean:
            # Something survived the helper's kill loop: kill the whole sandbox's processes.
            self._log.warning("sandbox.helper_sweep_failed")
            with anyio.CancelScope(shield=True):
                await self._drop_helper()
        common: dict[str, Any] = {
            "stdout": out.value(),
            "stderr": err.value(),
            "stdout_truncated": out.truncated,
            "stderr_truncated": err.truncated,
            "duration_s": time.monotonic() - started,
            "oom_killed": self._oom_kills() > oom_before,
        }
        if reply.timed_out:
            return ExecResult(exit_code=None, timed_out=True, signal=int(signal.SIGKILL), **common)
        if reply.status is None:
            return ExecResult.infra(
                SandboxBrokenError("the exec helper lost the command's exit status"),
                duration_s=common["duration_s"],
            )
        exit_code, sig = status_to_exit(reply.status)
        return ExecResult(exit_code=exit_code, signal=sig, **common)

    async def _signal_from_command(self, exc: BaseException) -> int | None:
        """The signal the running command sent its helper, if the loss looks like that: the
        helper was killed by a signal, or it is stopped (and so missed the deadline)."""
        if isinstance(exc, HelperExitedError):
            return _signal_of(await self._helper_exit_status())
        if isinstance(exc, TimeoutError) and await self._helper_stopped():
            return int(signal.SIGSTOP)
        return None

    def _helper_signalled_by_command(
        self, sig: int, out: CappedBuffer, err: CappedBuffer, started: float
    ) -> ExecResult:
        """The command killed or stopped its helper: the command's failure (everything in the
        sandbox has been killed since), and a sandbox that must not be reused."""
        try:
            name = signal.Signals(sig).name
        except ValueError:
            name = f"signal {sig}"
        verb = "stopped" if sig == signal.SIGSTOP else "killed"
        self._tainted = f"a command {verb} the exec helper ({name})"
        self._log.info("sandbox.helper_signalled_by_command", signal=sig)
        note = (
            f"roost: the command {verb} the sandbox's exec helper ({name}); every process in "
            "the sandbox was killed\n"
        ).encode()
        return ExecResult(
            exit_code=128 + signal.SIGKILL,
            signal=int(signal.SIGKILL),
            stdout=out.value(),
            stderr=err.value() + note,
            stdout_truncated=out.truncated,
            stderr_truncated=err.truncated,
            duration_s=time.monotonic() - started,
        )

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
    ) -> Any:
        """One run request; a backend may watch something else meanwhile (gVisor)."""
        return await helper.run(
            argv, stdin=stdin, env=env, cwd=cwd, timeout=timeout, out=out, err=err
        )

    async def _control(self, kind: bytes, doc: dict[str, Any], payload: bytes = b"") -> bytes:
        helper = await self._helper_ready()
        try:
            with anyio.fail_after(CONTROL_TIMEOUT_S):
                return await helper.request(kind, doc, payload)
        except TimeoutError:
            with anyio.CancelScope(shield=True):
                await self._drop_helper()
            raise HelperLostError(
                f"the exec helper did not answer {kind.decode()!r} in {CONTROL_TIMEOUT_S}s"
            ) from None

    async def _reset(self) -> None:
        answer = json.loads(await self._control(b"Z", {"dirs": self._writable_dirs()}))
        if answer["errors"]:
            raise SandboxBrokenError(f"reset left the sandbox dirty: {answer['errors'][:3]}")

    async def _inspect(self) -> dict[str, Any]:
        doc: dict[str, Any] = json.loads(await self._control(b"V", {"dirs": self._writable_dirs()}))
        return doc

    async def _open_first_helper(self) -> None:
        """The end of a backend's `_start`: the helper, and the pristine state to compare with."""
        self._helper = await self._open_helper()
        await self._record_pristine()

    async def _record_pristine(self) -> None:
        self._pristine = await self._inspect()

    # --- public extras: validation and snapshots ------------------------------------------

    async def validate(self) -> list[str]:
        """What differs from the pristine sandbox: stray processes, changed files, used disk,
        or a sandbox that cannot run a command. Empty when it is as good as fresh.

        :raises SandboxInfraError: when the sandbox cannot even be asked.
        """
        self._require_started()
        async with self._lock:
            if self._broken is not None:
                return [f"broken: {self._broken}"]
            if self._tainted is not None:
                return [f"tainted: {self._tainted}"]
            if self._pristine is None:
                await self._record_pristine()
            return await self._compare_with_pristine()

    async def _compare_with_pristine(self) -> list[str]:
        assert self._pristine is not None
        now = await self._inspect()
        problems = [f"stray process: {cmd}" for cmd in now["procs"]]
        for path in self._writable_dirs():
            before = {tuple(e[:1]): e for e in self._pristine["files"].get(path, [])}
            after = {tuple(e[:1]): e for e in now["files"].get(path, [])}
            for name in sorted(set(before) | set(after)):
                if before.get(name) != after.get(name):
                    problems.append(f"file differs from pristine: {path}/{name[0]}")
        for path, mode in now.get("modes", {}).items():
            if mode != self._pristine.get("modes", {}).get(path, mode):
                problems.append(
                    f"mode of {path} is {mode:o}, was {self._pristine['modes'][path]:o}"
                )
        for path in self._size_limited_dirs():
            lost = self._pristine["free"].get(path, 0) - now["free"].get(path, 0)
            if lost > FREE_SPACE_SLACK:
                problems.append(f"disk: {lost} bytes of {path} still in use")
        answer = await self._run(
            ["true"],
            stdin=None,
            timeout=CONTROL_TIMEOUT_S,
            env=self._environment(None),
            cwd=self._spec.workdir,
            output_limit=1024,
        )
        if answer.exit_code != 0:
            problems.append(f"does not answer: `true` gave {answer!r}")
        return problems

    async def snapshot(self) -> bytes:
        """The work directory as a tar archive (a prepared state to start others from)."""
        self._require_started()
        async with self._lock:
            return await self._control(b"T", {"dir": self._spec.workdir})

    async def restore(self, archive: bytes) -> None:
        """Make `archive` (from `snapshot`) this sandbox's baseline: the work directory is reset
        to it now and by every later `reset`, and it becomes the pristine state `validate`
        compares with. :raises SandboxBrokenError: when it cannot be restored."""
        self._require_started()
        async with self._lock:
            answer = json.loads(await self._control(b"L", {"dirs": self._writable_dirs()}, archive))
            if answer["errors"]:
                raise SandboxBrokenError(f"cannot restore the snapshot: {answer['errors'][:3]}")
            await self._record_pristine()


def _signal_of(status: int | None) -> int | None:
    """The signal a shell-style status says killed the process, or None."""
    if status is None:
        return None
    return status_to_exit(status)[1]


def _oom_result(out: CappedBuffer, err: CappedBuffer, started: float) -> ExecResult:
    return ExecResult(
        exit_code=128 + signal.SIGKILL,
        signal=int(signal.SIGKILL),
        oom_killed=True,
        stdout=out.value(),
        stderr=err.value(),
        stdout_truncated=out.truncated,
        stderr_truncated=err.truncated,
        duration_s=time.monotonic() - started,
    )
