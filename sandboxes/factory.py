"""Make a sandbox from a `SandboxSpec`, by the spec's backend name."""

from __future__ import annotations

from typing import Any

from sandboxes._errors import SandboxConfigError
from sandboxes._protocol import Sandbox
from sandboxes._spec import BACKENDS, SandboxSpec


def create_sandbox(spec: SandboxSpec, **options: Any) -> Sandbox:
    """A new, not yet started sandbox for `spec`.

    `options` go to the backend's constructor: `docker=` (a shared aiodocker client) for docker
    and gvisor, `base_dir=` for process, `profile=`, `seed=`, `responder=` for sim.

    :raises SandboxConfigError: for an unknown backend or an option it does not take.
    """
    # Imported here so that using one backend never requires the others' dependencies.
    if spec.backend == "process":
        from sandboxes.process import ProcessSandbox as cls
    elif spec.backend == "docker":
        from sandboxes.docker import DockerSandbox as cls  # type: ignore[assignment]
    elif spec.backend == "gvisor":
        from sandboxes.docker import GVisorSandbox as cls  # type: ignore[assignment]
    elif spec.backend == "sim":
        from sandboxes.sim import SimSandbox as cls  # type: ignore[assignment]
    else:
        raise SandboxConfigError(f"backend: unknown backend {spec.backend!r} (known: {BACKENDS})")
    try:
        return cls(spec, **options)
    except TypeError as exc:
        raise SandboxConfigError(f"{spec.backend} backend: {exc}") from None
