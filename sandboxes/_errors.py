"""Every error the sandbox layer raises, in one place.

The hierarchy keeps the failure taxonomy of docs/architecture.md visible in the types: who is to
blame decides what the caller does next. A program that fails, times out or exceeds its limits is
*not* an exception at all: it is an ordinary `ExecResult`.

    SandboxError
    ├── SandboxConfigError (also ValueError)   the caller asked for something invalid
    │   └── UnsafePathError                    a file path escapes the sandbox's work directory
    ├── SandboxStateError                      the sandbox is not in a state that allows the call
    │   └── SandboxClosedError                 you closed it (or it was never started)
    ├── SandboxFileError                       put_file/get_file failed inside a healthy sandbox
    └── SandboxInfraError                      the sandbox itself failed: retry on a fresh one
        ├── BackendUnavailableError            bubblewrap, dockerd or runsc is missing
        ├── SandboxStartError                  could not create or start the sandbox
        ├── DaemonError                        the Docker daemon answered with an error
        │   └── DaemonTimeoutError             the Docker daemon did not answer in time
        └── SandboxBrokenError                 the sandbox died or cannot be controlled any more

`SandboxInfraError.kind` is the same string that `ExecResult.infra_error.kind` carries, so an
infrastructure failure can travel as data (in a result, a log record) and be raised again.
"""

from __future__ import annotations

from typing import ClassVar, Literal

InfraKind = Literal[
    "backend_unavailable",
    "start_failed",
    "daemon_error",
    "daemon_timeout",
    "sandbox_broken",
]


class SandboxError(Exception):
    """Base class of every error raised by `sandboxes`."""


class SandboxConfigError(SandboxError, ValueError):
    """A spec, size, command, path or option is invalid; the message names what is wrong."""


class UnsafePathError(SandboxConfigError):
    """A file path is absolute, contains `..`, or resolves (through a symlink) outside the work
    directory of the sandbox."""


class SandboxStateError(SandboxError):
    """The call is not allowed in the sandbox's current state (for example exec before start)."""


class SandboxClosedError(SandboxStateError):
    """The sandbox was closed; it cannot be used again."""


class SandboxFileError(SandboxError):
    """A file could not be written or read inside a healthy sandbox (missing file, disk full).

    This is the agent's world failing, not the infrastructure: the sandbox is still usable.
    """


class SandboxInfraError(SandboxError):
    """The sandbox itself failed; the program inside is not to blame.

    The right reaction is to quarantine this sandbox and retry on a fresh one.
    """

    kind: ClassVar[InfraKind] = "sandbox_broken"


class BackendUnavailableError(SandboxInfraError):
    """The backend's real parts (bubblewrap, dockerd, runsc, an image) are missing here."""

    kind: ClassVar[InfraKind] = "backend_unavailable"


class SandboxStartError(SandboxInfraError):
    """The sandbox could not be created or started."""

    kind: ClassVar[InfraKind] = "start_failed"


class DaemonError(SandboxInfraError):
    """The Docker daemon answered a call with an error, or could not be reached (`status` 0)."""

    kind: ClassVar[InfraKind] = "daemon_error"

    def __init__(self, message: str, *, status: int = 0) -> None:
        super().__init__(message)
        self.status = status


class DaemonTimeoutError(DaemonError):
    """The Docker daemon did not answer a call before its deadline."""

    kind: ClassVar[InfraKind] = "daemon_timeout"


class SandboxBrokenError(SandboxInfraError):
    """The sandbox died, or its processes could not be killed; it must not be reused."""

    kind: ClassVar[InfraKind] = "sandbox_broken"


_BY_KIND: dict[str, type[SandboxInfraError]] = {
    cls.kind: cls
    for cls in (
        BackendUnavailableError,
        SandboxStartError,
        DaemonError,
        DaemonTimeoutError,
        SandboxBrokenError,
    )
}


def infra_error_class(kind: str) -> type[SandboxInfraError]:
    """The exception class for an infrastructure failure kind (`SandboxInfraError` if unknown)."""
    return _BY_KIND.get(kind, SandboxInfraError)
