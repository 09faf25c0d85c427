"""Docker-specific behaviour: container hardening, missing images, the reaper, image builds."""

from __future__ import annotations

import time

import aiodocker
import pytest

from sandboxes import (
    BackendUnavailableError,
    SandboxSpec,
    build_images,
    create_sandbox,
    reap,
)
from sandboxes._reaper import EXPIRY_LABEL, OWNER, OWNER_LABEL, RUN_LABEL
from sandboxes.docker import DockerSandbox
from tests.sandboxes.conftest import require_backend

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(120)]


@pytest.fixture
async def docker() -> aiodocker.Docker:
    require_backend("docker")
    client = aiodocker.Docker()
    yield client
    await client.close()


async def test_container_is_hardened_and_labelled(docker: aiodocker.Docker) -> None:
    async with create_sandbox(SandboxSpec(backend="docker"), docker=docker) as sb:
        assert isinstance(sb, DockerSandbox)
        info = await docker.containers.get(sb.container_name)
        host = info["HostConfig"]
        labels = info["Config"]["Labels"]
        caps = await sb.exec(["sh", "-c", "grep CapEff /proc/self/status"])
    assert host["CapDrop"] == ["ALL"]
    assert "no-new-privileges" in host["SecurityOpt"]
    assert host["Memory"] == host["MemorySwap"] == 256 * 2**20
    assert host["NetworkMode"] == "none"
    assert host["ReadonlyRootfs"] is True
    assert host["PidsLimit"] == 64
    assert host["NanoCpus"] == 10**9
    assert labels[OWNER_LABEL] == OWNER
    assert float(labels[EXPIRY_LABEL]) > time.time()
    assert caps.stdout.split()[-1] == b"0000000000000000"


async def test_missing_image_is_a_backend_unavailable_error(docker: aiodocker.Docker) -> None:
    spec = SandboxSpec(backend="docker", image="roost-missing:does-not-exist")
    with pytest.raises(BackendUnavailableError, match="roost sandbox images"):
        async with create_sandbox(spec, docker=docker):
            pass


async def test_reaper_removes_expired_and_this_runs_containers(docker: aiodocker.Docker) -> None:
    expired = SandboxSpec(backend="docker", lifetime_s=0.001)
    sb = create_sandbox(expired, docker=docker)
    await sb.start()
    assert isinstance(sb, DockerSandbox)
    removed = await reap(docker, expired=True, now=time.time() + 1)
    assert sb.container_name in removed
    await sb.close()  # the container is already gone: close must not fail

    other = create_sandbox(SandboxSpec(backend="docker"), docker=docker)
    await other.start()
    assert isinstance(other, DockerSandbox)
    info = await docker.containers.get(other.container_name)
    removed = await reap(docker, run_id=info["Config"]["Labels"][RUN_LABEL], expired=False)
    assert other.container_name in removed
    await other.close()


async def test_images_are_cached_by_content_hash(docker: aiodocker.Docker) -> None:
    reports = await build_images(docker)
    assert reports
    assert all(r.action == "cached" for r in reports)
