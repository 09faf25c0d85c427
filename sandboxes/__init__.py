"""sandboxes: isolated places where model actions really run.

One protocol (`Sandbox`), four backends (`process`, `docker`, `gvisor`, `sim`), chosen by
`SandboxSpec.backend` through `create_sandbox`. See docs/sandboxes.md for the threat model.
"""

from sandboxes._errors import (
    BackendUnavailableError,
    DaemonError,
    DaemonTimeoutError,
    SandboxBrokenError,
    SandboxClosedError,
    SandboxConfigError,
    SandboxError,
    SandboxFileError,
    SandboxInfraError,
    SandboxStartError,
    SandboxStateError,
    UnsafePathError,
)
from sandboxes._images import ImageReport, build_images
from sandboxes._protocol import Command, Sandbox
from sandboxes._reaper import RUN_ID, reap
from sandboxes._runtimes import RUNTIMES, Runtime, get_runtime, image_tag
from sandboxes._spec import (
    BACKENDS,
    BackendName,
    ExecResult,
    InfraFailure,
    SandboxSpec,
    load_spec,
    parse_size,
)
from sandboxes.factory import create_sandbox

__all__ = [
    "BACKENDS",
    "RUNTIMES",
    "RUN_ID",
    "BackendName",
    "BackendUnavailableError",
    "Command",
    "DaemonError",
    "DaemonTimeoutError",
    "ExecResult",
    "ImageReport",
    "InfraFailure",
    "Runtime",
    "Sandbox",
    "SandboxBrokenError",
    "SandboxClosedError",
    "SandboxConfigError",
    "SandboxError",
    "SandboxFileError",
    "SandboxInfraError",
    "SandboxSpec",
    "SandboxStartError",
    "SandboxStateError",
    "UnsafePathError",
    "build_images",
    "create_sandbox",
    "get_runtime",
    "image_tag",
    "load_spec",
    "parse_size",
    "reap",
]
