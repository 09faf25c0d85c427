"""The data a sandbox is made from (`SandboxSpec`) and what an exec returns (`ExecResult`).

Both are frozen msgspec structs so they can be logged, written to the run log and sent over a wire
unchanged. Sizes are plain byte counts inside the structs; `parse_size` and `load_spec` accept the
human forms ("256m") at the boundary, with errors that name the field.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Mapping
from typing import Any, Literal

import msgspec

from sandboxes._errors import InfraKind, SandboxConfigError, SandboxInfraError, infra_error_class

BackendName = Literal["process", "docker", "gvisor", "sim"]
BACKENDS: tuple[BackendName, ...] = ("process", "docker", "gvisor", "sim")

KiB = 1024
MiB = 1024 * KiB
GiB = 1024 * MiB

_SIZE_RE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kmgt]?)(?:i?b)?\s*$", re.IGNORECASE)
_UNITS = {"": 1, "k": KiB, "m": MiB, "g": GiB, "t": 1024 * GiB}
#: The smallest CPU share a sandbox may ask for: 1 ms of each 100 ms cgroup period.
MIN_CPUS = 0.01
_USER_RE = re.compile(r"\d+(?::\d+)?")  # fullmatch: `$` would accept "1000\n"
_SIZE_FIELDS = ("memory", "disk", "output_limit")


def parse_size(value: int | str, *, what: str = "size") -> int:
    """Bytes from an int or a string such as "256m", "1.5g", "64MiB" (binary units).

    :raises SandboxConfigError: naming `what` and the offending value.
    """
    if isinstance(value, bool):
        raise SandboxConfigError(f"{what}: expected a size such as '256m', got {value!r}")
    if isinstance(value, int):
        if value <= 0:
            raise SandboxConfigError(f"{what}: must be positive, got {value}")
        return value
    match = _SIZE_RE.match(value) if isinstance(value, str) else None
    if match is None:
        raise SandboxConfigError(
            f"{what}: cannot parse {value!r} as a size; expected a number with an optional "
            "k/m/g/t suffix, for example '256m'"
        )
    number = float(match.group(1)) * _UNITS[match.group(2).lower()]
    if number < 1:
        raise SandboxConfigError(f"{what}: must be at least one byte, got {value!r}")
    return int(number)


class SandboxSpec(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """What a sandbox is: backend, runtime and limits. Every field has a safe default.

    `memory`, `disk` and `output_limit` are bytes (use `load_spec` for "256m" forms). `disk` bounds
    the writable work directory; `network` is off unless asked for; `timeout_s` is the default
    per-exec timeout; `user` is `uid[:gid]` inside the sandbox (the images name uid 1000
    "sandbox"); `lifetime_s` is how long the reaper lets a forgotten container live.
    """

    backend: BackendName = "docker"
    runtime: str = "python"
    image: str | None = None
    cpus: float = 1.0
    memory: int = 256 * MiB
    pids: int = 64
    disk: int = 64 * MiB
    network: bool = False
    timeout_s: float = 10.0
    env: dict[str, str] = msgspec.field(default_factory=dict)
    workdir: str = "/work"
    user: str = "1000:1000"
    output_limit: int = 1 * MiB
    lifetime_s: float = 3600.0

    def __post_init__(self) -> None:
        # Raising ValueError subclasses here lets msgspec.convert report them with the field path.
        # Below 0.01 the CPU quota falls under the kernel's 1 ms minimum: the cgroup write
        # fails, and the process backend would run without its memory and pid limits.
        if not MIN_CPUS <= self.cpus <= 1024:
            raise SandboxConfigError(f"cpus: must be in [{MIN_CPUS}, 1024], got {self.cpus}")
        if self.memory < 16 * MiB:
            raise SandboxConfigError(f"memory: must be at least 16m, got {self.memory} bytes")
        if self.pids < 8:
            raise SandboxConfigError(f"pids: must be at least 8, got {self.pids}")
        if self.disk < 1 * MiB:
            raise SandboxConfigError(f"disk: must be at least 1m, got {self.disk} bytes")
        if self.output_limit < 1:
            raise SandboxConfigError(f"output_limit: must be positive, got {self.output_limit}")
        if not self.timeout_s > 0:
            raise SandboxConfigError(f"timeout_s: must be positive, got {self.timeout_s}")
        if not self.lifetime_s > 0:
            raise SandboxConfigError(f"lifetime_s: must be positive, got {self.lifetime_s}")
        if not re.fullmatch(r"[a-z0-9][a-z0-9_.-]*", self.runtime):
            raise SandboxConfigError(f"runtime: {self.runtime!r} is not a valid runtime key")
        wd = self.workdir
        if not wd.startswith("/") or posixpath.normpath(wd) != wd or wd == "/":
            raise SandboxConfigError(
                f"workdir: must be a normalized absolute path other than '/', got {wd!r}"
            )
        if not _USER_RE.fullmatch(self.user):
            raise SandboxConfigError(f"user: expected 'uid' or 'uid:gid' digits, got {self.user!r}")
        for key, val in self.env.items():
            check_env_entry(key, val, what="env")

    @property
    def uid(self) -> int:
        return int(self.user.split(":")[0])

    @property
    def gid(self) -> int:
        parts = self.user.split(":")
        return int(parts[1]) if len(parts) > 1 else int(parts[0])


def check_env_entry(key: str, value: str, *, what: str) -> None:
    """Reject environment entries that cannot be passed to execve."""
    if not key or "=" in key or "\0" in key:
        raise SandboxConfigError(f"{what}: invalid environment variable name {key!r}")
    if "\0" in value:
        raise SandboxConfigError(f"{what}: value of {key} contains a NUL byte")


def load_spec(data: Mapping[str, Any], **overrides: Any) -> SandboxSpec:
    """A `SandboxSpec` from a mapping (config file, CLI), accepting "256m"-style sizes.

    :raises SandboxConfigError: naming the field that is wrong.
    """
    raw = {**data, **overrides}
    for name in _SIZE_FIELDS:
        if name in raw and isinstance(raw[name], str | int):
            raw[name] = parse_size(raw[name], what=name)
    try:
        return msgspec.convert(raw, SandboxSpec)
    except msgspec.ValidationError as exc:
        raise SandboxConfigError(f"invalid sandbox spec: {exc}") from None


class InfraFailure(msgspec.Struct, frozen=True, kw_only=True):
    """An infrastructure failure carried as data: the sandbox failed, not the program."""

    kind: InfraKind
    message: str

    @classmethod
    def from_exception(cls, exc: SandboxInfraError) -> InfraFailure:
        return cls(kind=exc.kind, message=str(exc))

    def to_exception(self) -> SandboxInfraError:
        return infra_error_class(self.kind)(self.message)


class ExecResult(msgspec.Struct, frozen=True, kw_only=True):
    """The outcome of one exec.

    `exit_code` is the program's exit status, or None when it did not end by itself (timed out,
    or the sandbox failed). When a signal ended the program, `signal` names it and `exit_code` is
    128 + signal, as a shell reports it. `stdout`/`stderr` are the exact bytes, cut at the spec's
    `output_limit` with `*_truncated` set. `infra_error` is set only when the sandbox itself
    failed; then nothing else in the result says anything about the program.
    """

    exit_code: int | None
    stdout: bytes = b""
    stderr: bytes = b""
    stdout_truncated: bool = False
    stderr_truncated: bool = False
    duration_s: float = 0.0
    timed_out: bool = False
    oom_killed: bool = False
    signal: int | None = None
    infra_error: InfraFailure | None = None

    @property
    def ok(self) -> bool:
        """True when the program ran to completion and exited 0."""
        return self.exit_code == 0 and self.infra_error is None and not self.timed_out

    def raise_for_infra(self) -> ExecResult:
        """Raise the `SandboxInfraError` this result carries, if any; otherwise return self."""
        if self.infra_error is not None:
            raise self.infra_error.to_exception()
        return self

    @classmethod
    def infra(cls, exc: SandboxInfraError, *, duration_s: float = 0.0) -> ExecResult:
        return cls(
            exit_code=None, duration_s=duration_s, infra_error=InfraFailure.from_exception(exc)
        )


def status_to_exit(status: int) -> tuple[int, int | None]:
    """(exit_code, signal) from a shell-style status where 128+N means "killed by signal N".

    Docker and bubblewrap both report a signal death this way; like a shell, we read it back.
    """
    if 128 < status <= 128 + 64:
        return status, status - 128
    return status, None
