"""What every real backend shares: lifecycle, argument checks, one exec at a time, file calls.

A backend subclasses `BaseSandbox` and implements `_start`, `_run` (one exec, already checked),
`_reset` and `_close`. The base keeps the contract of the `Sandbox` protocol in one place.
"""

from __future__ import annotations

import abc
import posixpath
import secrets
from collections.abc import Mapping, Sequence
from types import TracebackType
from typing import Self

import anyio
import structlog

from sandboxes._errors import (
    SandboxBrokenError,
    SandboxClosedError,
    SandboxConfigError,
    SandboxFileError,
    SandboxInfraError,
    SandboxStateError,
    UnsafePathError,
)
from sandboxes._files import GET_SCRIPT, PUT_SCRIPT, UNSAFE_EXIT, check_relative_path
from sandboxes._protocol import Command
from sandboxes._spec import ExecResult, SandboxSpec, check_env_entry

log = structlog.get_logger(__name__)

FILE_TIMEOUT_S = 60.0
CLOSE_TIMEOUT_S = 90.0  # a container removal is one daemon call of at most 30 s, plus helpers
MAX_FILE_BYTES = 64 * 1024 * 1024
BASE_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


def new_sandbox_id() -> str:
    return secrets.token_hex(6)


def to_argv(cmd: Command) -> list[str]:
    """argv for `cmd`; a string runs under `/bin/sh -c`. :raises SandboxConfigError:"""
    if isinstance(cmd, str):
        if not cmd.strip():
            raise SandboxConfigError("command: empty shell string")
        return ["/bin/sh", "-c", cmd]
    if not isinstance(cmd, Sequence):
        raise SandboxConfigError(f"command: expected a string or a list of strings, got {cmd!r}")
    argv = list(cmd)
    if not argv:
        raise SandboxConfigError("command: empty argv")
    for arg in argv:
        if not isinstance(arg, str):
            raise SandboxConfigError(f"command: argument {arg!r} is not a string")
        if "\0" in arg:
            raise SandboxConfigError(f"command: argument {arg!r} contains a NUL byte")
    return argv


class BaseSandbox(abc.ABC):
    """Shared behaviour of the process, docker and gvisor backends."""

    def __init__(self, spec: SandboxSpec) -> None:
        self._spec = spec
        self._id = new_sandbox_id()
        self._state = "new"  # new -> started -> closed
        self._broken: str | None = None
        self._lock = anyio.Lock()
        self._log = log.bind(sandbox=self._id, backend=spec.backend)

    @property
    def id(self) -> str:
        return self._id

    @property
    def spec(self) -> SandboxSpec:
        return self._spec

    # --- lifecycle ------------------------------------------------------------------------

    async def start(self) -> None:
        if self._state == "closed":
            raise SandboxClosedError(f"sandbox {self._id} is closed")
        if self._state == "started":
            return
        try:
            await self._start()
        except BaseException:
            # Whatever was half-built must not leak, even when the start was cancelled.
            await self._close_within_deadline()
            self._state = "closed"
            raise
        self._state = "started"
        self._log.debug("sandbox.started")

    async def close(self) -> None:
        if self._state == "closed":
            return
        self._state = "closed"
        await self._close_within_deadline()
        self._log.debug("sandbox.closed")

    async def _close_within_deadline(self) -> None:
        # Shielded, so a cancelled caller still cleans up; bounded, so a daemon that stopped
        # answering cannot hang the caller (what is left behind, the reaper removes).
        with anyio.move_on_after(CLOSE_TIMEOUT_S, shield=True) as scope:
            await self._close()
        if scope.cancelled_caught:
            self._log.warning("sandbox.close_timed_out", seconds=CLOSE_TIMEOUT_S)

    async def reset(self) -> None:
        self._require_started()
        async with self._lock:
            if self._broken is not None:
                raise SandboxBrokenError(self._broken)
            await self._reset()

    @property
    def broken(self) -> str | None:
        """Why the sandbox can no longer be used, or None while it is healthy."""
        return self._broken

    def _mark_broken(self, reason: str) -> None:
        if self._broken is None:
            self._broken = reason
            self._log.warning("sandbox.broken", reason=reason)

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    # --- exec -----------------------------------------------------------------------------

    async def exec(
        self,
        cmd: Command,
        *,
        stdin: bytes | None = None,
        timeout: float | None = None,
        env: Mapping[str, str] | None = None,
        cwd: str | None = None,
    ) -> ExecResult:
        argv = to_argv(cmd)
        if timeout is None:
            timeout = self._spec.timeout_s
        if not timeout > 0:
            raise SandboxConfigError(f"timeout: must be positive, got {timeout}")
        if stdin is not None and not isinstance(stdin, bytes | bytearray | memoryview):
            raise SandboxConfigError("stdin: expected bytes")
        full_env = self._environment(env)
        workdir = self._resolve_cwd(cwd)
        return await self._exec_checked(
            argv,
            stdin=bytes(stdin) if stdin is not None else None,
            timeout=timeout,
            env=full_env,
            cwd=workdir,
            output_limit=self._spec.output_limit,
            agent=True,
        )

    async def _exec_checked(
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
        self._require_started()
        async with self._lock:
            self._require_started()
            if self._broken is not None:
                return ExecResult.infra(SandboxBrokenError(self._broken))
            return await self._run(
                argv,
                stdin=stdin,
                timeout=timeout,
                env=env,
                cwd=cwd,
                output_limit=output_limit,
                agent=agent,
            )

    def _environment(self, extra: Mapping[str, str] | None) -> dict[str, str]:
        env = {"PATH": BASE_PATH, "HOME": self._spec.workdir, "LANG": "C.UTF-8"}
        env.update(self._spec.env)
        for key, val in (extra or {}).items():
            check_env_entry(key, val, what="env")
            env[key] = val
        return env

    def _resolve_cwd(self, cwd: str | None) -> str:
        if cwd is None:
            return self._spec.workdir
        if "\0" in cwd:
            raise SandboxConfigError(f"cwd: {cwd!r} contains a NUL byte")
        return posixpath.normpath(posixpath.join(self._spec.workdir, cwd))

    def _require_started(self) -> None:
        if self._state == "closed":
            raise SandboxClosedError(f"sandbox {self._id} is closed")
        if self._state != "started":
            raise SandboxStateError(f"sandbox {self._id} is not started; call start() first")

    # --- files ----------------------------------------------------------------------------

    async def put_file(self, path: str, data: bytes, *, mode: int = 0o644) -> None:
        rel = check_relative_path(path)
        if not 0 <= mode <= 0o7777:
            raise SandboxConfigError(f"mode: {mode:o} is not a file mode")
        result = await self._exec_checked(
            ["/bin/sh", "-c", PUT_SCRIPT, "roost-put", self._spec.workdir, rel, f"{mode:o}"],
            stdin=bytes(data),
            timeout=FILE_TIMEOUT_S,
            env=self._environment(None),
            cwd=self._spec.workdir,
            output_limit=64 * 1024,
        )
        self._check_file_result(result, path, "write")

    async def get_file(self, path: str) -> bytes:
        rel = check_relative_path(path)
        result = await self._exec_checked(
            ["/bin/sh", "-c", GET_SCRIPT, "roost-get", self._spec.workdir, rel],
            stdin=None,
            timeout=FILE_TIMEOUT_S,
            env=self._environment(None),
            cwd=self._spec.workdir,
            output_limit=MAX_FILE_BYTES,
        )
        self._check_file_result(result, path, "read")
        if result.stdout_truncated:
            raise SandboxFileError(f"cannot read {path!r}: larger than {MAX_FILE_BYTES} bytes")
        return result.stdout

    def _check_file_result(self, result: ExecResult, path: str, verb: str) -> None:
        if result.infra_error is not None:
            raise result.infra_error.to_exception()
        if result.timed_out:
            raise SandboxInfraError(f"cannot {verb} {path!r}: timed out after {FILE_TIMEOUT_S}s")
        if result.exit_code == UNSAFE_EXIT:
            raise UnsafePathError(result.stderr.decode(errors="replace").strip())
        if result.exit_code != 0:
            detail = result.stderr.decode(errors="replace").strip() or f"exit {result.exit_code}"
            raise SandboxFileError(f"cannot {verb} {path!r}: {detail}")

    # --- backend hooks --------------------------------------------------------------------

    @abc.abstractmethod
    async def _start(self) -> None: ...

    @abc.abstractmethod
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
        """Run one checked exec; the caller holds the exec lock. Never raises for program or
        infrastructure failure: both are reported in the result. `agent` is true for a command
        of the caller's (`exec`), false for the sandbox's own (file transfer, health check): only
        an agent's command can be blamed for what happens to the sandbox while it runs."""

    @abc.abstractmethod
    async def _reset(self) -> None: ...

    @abc.abstractmethod
    async def _close(self) -> None: ...
