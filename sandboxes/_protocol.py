"""The `Sandbox` protocol: the one seam every backend (and every test double) plugs into."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from types import TracebackType
from typing import Protocol, Self, runtime_checkable

from sandboxes._spec import ExecResult, SandboxSpec

Command = str | Sequence[str]
"""An argv list, or a shell string which runs as `/bin/sh -c STRING`."""


@runtime_checkable
class Sandbox(Protocol):
    """An isolated place to run commands, with files in a private work directory.

    Lifecycle: `start()` once (or `async with`), any number of `exec`/file calls, `close()` once.
    Execs in one sandbox run one at a time. When an exec ends, every process it started has
    ended too: nothing outlives its exec, on any backend.

    A program's own failure (non-zero exit, timeout, out of memory) is an `ExecResult`, never an
    exception. Failures of the sandbox itself are `SandboxInfraError`s: raised by `start`, `reset`
    and the file calls, and carried in `ExecResult.infra_error` by `exec`.
    """

    @property
    def id(self) -> str:
        """A short unique name, also used in container names and labels."""
        ...

    @property
    def spec(self) -> SandboxSpec: ...

    async def start(self) -> None:
        """Create the sandbox. :raises SandboxInfraError: when it cannot be created."""
        ...

    async def exec(
        self,
        cmd: Command,
        *,
        stdin: bytes | None = None,
        timeout: float | None = None,
        env: Mapping[str, str] | None = None,
        cwd: str | None = None,
    ) -> ExecResult:
        """Run `cmd` to completion, or kill its whole process tree after `timeout` seconds
        (default `spec.timeout_s`) and report `timed_out`. `cwd` is relative to the work
        directory unless absolute; `env` is added to the spec's environment."""
        ...

    async def put_file(self, path: str, data: bytes, *, mode: int = 0o644) -> None:
        """Write `data` to `path` relative to the work directory, creating parent directories.

        :raises UnsafePathError: for absolute paths, `..`, or a symlink that leads outside.
        """
        ...

    async def get_file(self, path: str) -> bytes:
        """Read `path` relative to the work directory (same path rules as `put_file`).

        :raises SandboxFileError: when the file is missing or larger than the output limit.
        """
        ...

    async def reset(self) -> None:
        """Bring the sandbox back to its fresh state: empty work directory, no process left."""
        ...

    async def close(self) -> None:
        """Destroy the sandbox and everything in it. Idempotent; never raises for cleanup."""
        ...

    async def __aenter__(self) -> Self: ...

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None: ...
