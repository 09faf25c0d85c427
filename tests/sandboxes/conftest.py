"""Sandbox tests run against the real parts (bubblewrap, dockerd, runsc, the local images).

Outside CI a missing part skips the tests that need it. In CI (`CI=true`) it fails them: the
docker and gvisor backends must really be exercised there, a skip would hide that they were not.
`scripts/real_parts.sh` (run by `make test`) prepares the parts on a machine where it is root.
"""

from __future__ import annotations

import os
import shutil
from functools import cache
from typing import Any

import aiodocker
import anyio
import pytest

from sandboxes import RUNTIMES, SandboxSpec, image_tag

IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")
REAL_BACKENDS = ["process", "docker", "gvisor"]


@pytest.fixture
def anyio_backend() -> Any:
    # Real processes and containers need the real clock, not the suite's virtual default.
    return ("asyncio", {})


async def _docker_status() -> str | None:
    """None when dockerd answers, runsc is registered and every runtime image exists."""
    docker = aiodocker.Docker()
    try:
        with anyio.fail_after(10):
            info = await docker.system.info()
            missing = []
            for name in RUNTIMES:
                try:
                    await docker.images.inspect(image_tag(name))
                except aiodocker.DockerError:
                    missing.append(image_tag(name))
        if missing:
            return f"images missing: {missing} (run `roost sandbox images`)"
        if "runsc" not in (info.get("Runtimes") or {}):
            return "runsc is not registered with dockerd"
        return None
    except (OSError, aiodocker.DockerError, TimeoutError) as exc:
        return f"dockerd is not reachable: {exc}"
    finally:
        await docker.close()


@cache
def unavailable_reason(backend: str) -> str | None:
    if backend == "process":
        return None if shutil.which("bwrap") else "bubblewrap (bwrap) is not installed"
    if backend in ("docker", "gvisor"):
        reason = anyio.run(_docker_status)
        if reason and backend == "docker" and reason.startswith("runsc"):
            return None
        return reason
    return None


def require_backend(backend: str) -> None:
    """Skip (outside CI) or fail (in CI) when `backend`'s real parts are missing."""
    reason = unavailable_reason(backend)
    if reason is None:
        return
    message = f"{backend} backend unavailable: {reason}"
    if IN_CI:
        pytest.fail(f"{message} (CI must run every backend; see scripts/real_parts.sh)")
    pytest.skip(message)


@pytest.fixture(params=REAL_BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    name: str = request.param
    require_backend(name)
    return name


@pytest.fixture
def spec(backend: str) -> SandboxSpec:
    return SandboxSpec(backend=backend)  # type: ignore[arg-type]


@pytest.fixture(scope="session", autouse=True)
def _reap_leftovers() -> Any:
    """Reap expired containers (earlier crashed runs) first, and this run's containers last."""
    docker_ok = unavailable_reason("docker") is None
    if docker_ok:
        anyio.run(_sweep, None)
    yield
    if docker_ok:
        from sandboxes import RUN_ID

        anyio.run(_sweep, RUN_ID)


async def _sweep(run_id: str | None) -> None:
    from sandboxes import reap
    from sandboxes._docker_calls import docker_client

    # A clear error, not aiodocker's bare assertion, if a test left the host without a daemon.
    docker = docker_client()
    try:
        await reap(docker, run_id=run_id, expired=True)
    finally:
        await docker.close()
