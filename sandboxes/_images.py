"""Building the sandbox images locally (no registry is reachable).

1. Root filesystem: `debootstrap` per `BASE_RECIPE`, the `sandbox` user added, apt caches
   dropped, packed as a tarball under the cache directory (`$ROOST_CACHE_DIR`, else
   `$XDG_CACHE_HOME/roost`, else `~/.cache/roost`) named by the recipe's hash, so CI and reruns
   reuse it. Downloaded .debs are cached there too.
2. Base image: `docker import` of that tarball as `roost-base:<hash>`.
3. One image per runtime: `docker build` FROM the base (Dockerfile and init only, no RUN).

Every step is skipped when its output (tarball, tag) already exists: `build_images` is idempotent.
Every call to the daemon or a tool has a deadline.
"""

from __future__ import annotations

import io
import os
import shutil
import tarfile
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import aiodocker
import anyio
import structlog

from sandboxes._docker_calls import daemon_call
from sandboxes._errors import BackendUnavailableError, DaemonError, SandboxStartError
from sandboxes._runtimes import (
    BASE_RECIPE,
    RUNTIMES,
    base_key,
    base_tag,
    dockerfile,
    get_runtime,
    image_tag,
)
from sandboxes._runtimes import INIT_PY as INIT_SOURCE

log = structlog.get_logger(__name__)

DEBOOTSTRAP_TIMEOUT_S = 1200.0
IMPORT_TIMEOUT_S = 300.0
BUILD_TIMEOUT_S = 300.0
DEFAULT_MIRROR = "http://deb.debian.org/debian"


@dataclass(frozen=True)
class ImageReport:
    """What `build_images` did for one artefact: "built" or "cached", and how long it took."""

    name: str
    action: str
    seconds: float


def cache_dir() -> Path:
    if env := os.environ.get("ROOST_CACHE_DIR"):
        return Path(env)
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg) if xdg else Path.home() / ".cache") / "roost"


def debian_mirror() -> str:
    """`$ROOST_DEBIAN_MIRROR`, else the Debian mirror apt already uses here, else deb.debian.org."""
    if env := os.environ.get("ROOST_DEBIAN_MIRROR"):
        return env
    sources = [Path("/etc/apt/sources.list"), *sorted(Path("/etc/apt/sources.list.d").glob("*"))]
    for path in sources:
        try:
            text = path.read_text()
        except OSError:
            continue
        for line in text.splitlines():
            words = line.split()
            uris = (
                words[1:] if words[:1] == ["URIs:"] else words[1:2] if words[:1] == ["deb"] else []
            )
            for uri in uris:
                if uri.startswith("http") and uri.rstrip("/").endswith("/debian"):
                    return uri.rstrip("/")
    return DEFAULT_MIRROR


def rootfs_tarball() -> Path:
    return cache_dir() / "rootfs" / f"bookworm-{base_key()}.tar"


async def ensure_rootfs(*, mirror: str | None = None) -> tuple[Path, str]:
    """The cached root filesystem tarball, built with debootstrap when missing (root only)."""
    target = rootfs_tarball()
    if target.exists():
        return target, "cached"
    if os.geteuid() != 0 or shutil.which("debootstrap") is None:
        raise BackendUnavailableError(
            f"{target} is missing and building it needs root and debootstrap"
        )
    target.parent.mkdir(parents=True, exist_ok=True)
    debs = cache_dir() / "debs"
    debs.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="rootfs-", dir=target.parent))
    rootfs = work / "rootfs"
    try:
        include = ",".join(BASE_RECIPE["include"])  # type: ignore[arg-type]
        argv = [
            "debootstrap",
            f"--variant={BASE_RECIPE['variant']}",
            f"--include={include}",
            f"--cache-dir={debs}",
            str(BASE_RECIPE["suite"]),
            str(rootfs),
            mirror or debian_mirror(),
        ]
        log.info("images.debootstrap", argv=argv)
        await _run_tool(argv, DEBOOTSTRAP_TIMEOUT_S)
        _add_user(rootfs)
        partial = work / "rootfs.tar"
        await _run_tool(
            ["tar", "--numeric-owner", "-C", str(rootfs), "-cf", str(partial), "."], 300.0
        )
        partial.replace(target)
    finally:
        await anyio.to_thread.run_sync(lambda: shutil.rmtree(work, ignore_errors=True))
    return target, "built"


def _add_user(rootfs: Path) -> None:
    user = BASE_RECIPE["user"]
    assert isinstance(user, dict)
    with (rootfs / "etc/passwd").open("a") as f:
        f.write(f"{user['name']}:x:{user['uid']}:{user['gid']}::{user['home']}:/bin/bash\n")
    with (rootfs / "etc/group").open("a") as f:
        f.write(f"{user['name']}:x:{user['gid']}:\n")
    home = rootfs / str(user["home"]).lstrip("/")
    home.mkdir(exist_ok=True)
    os.chown(home, int(user["uid"]), int(user["gid"]))
    # Package caches are dead weight in every container.
    for sub in ("var/cache/apt/archives", "var/lib/apt/lists"):
        for entry in (rootfs / sub).glob("*"):
            if entry.is_file():
                entry.unlink()


async def _run_tool(argv: list[str], timeout: float, *, stdin: Path | None = None) -> None:
    try:
        with anyio.fail_after(timeout):
            if stdin is None:
                done = await anyio.run_process(argv, check=False)
            else:
                with stdin.open("rb") as f:
                    done = await anyio.run_process(argv, stdin=f, check=False)
    except TimeoutError:
        raise SandboxStartError(f"{argv[0]} did not finish within {timeout:.0f}s") from None
    if done.returncode != 0:
        tail = done.stderr.decode(errors="replace").strip()[-2000:]
        raise SandboxStartError(f"{argv[0]} failed (exit {done.returncode}): {tail}")


async def image_exists(docker: aiodocker.Docker, tag: str) -> bool:
    try:
        async with daemon_call(f"inspect image {tag}"):
            await docker.images.inspect(tag)
    except DaemonError as exc:
        if exc.status == 404:
            return False
        raise
    return True


async def build_images(
    docker: aiodocker.Docker,
    *,
    runtimes: list[str] | None = None,
    force: bool = False,
    on_report: Callable[[ImageReport], None] | None = None,
) -> list[ImageReport]:
    """Build whatever is missing of the base and the runtime images; returns what happened."""
    reports: list[ImageReport] = []

    def note(name: str, action: str, since: float) -> None:
        report = ImageReport(name, action, time.monotonic() - since)
        reports.append(report)
        log.info("images.step", name=name, action=action, seconds=round(report.seconds, 2))
        if on_report is not None:
            on_report(report)

    names = runtimes if runtimes is not None else sorted(RUNTIMES)
    wanted = [(get_runtime(n), image_tag(n)) for n in names]
    missing = [(rt, tag) for rt, tag in wanted if force or not await image_exists(docker, tag)]
    for rt, tag in wanted:
        if (rt, tag) not in missing:
            note(tag, "cached", time.monotonic())
    if not missing:
        return reports
    t0 = time.monotonic()
    if force or not await image_exists(docker, base_tag()):
        tarball, action = await ensure_rootfs()
        note(str(tarball), action, t0)
        t0 = time.monotonic()
        docker_cli = shutil.which("docker")
        if docker_cli is None:
            raise BackendUnavailableError("the docker CLI is needed for `docker import`")
        await _run_tool([docker_cli, "import", "-", base_tag()], IMPORT_TIMEOUT_S, stdin=tarball)
        note(base_tag(), "built", t0)
    for rt, tag in missing:
        t0 = time.monotonic()
        context = _build_context(dockerfile(rt), INIT_SOURCE)
        async with daemon_call(f"build image {tag}", timeout=BUILD_TIMEOUT_S):
            await docker.images.build(fileobj=context, encoding="identity", tag=tag, rm=True)
        note(tag, "built", t0)
    return reports


def _build_context(dockerfile_text: str, init_source: str) -> io.BytesIO:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for name, text in (("Dockerfile", dockerfile_text), ("init.py", init_source)):
            data = text.encode()
            info = tarfile.TarInfo(name)
            info.size = len(data)
            info.mode = 0o644
            tar.addfile(info, io.BytesIO(data))
    buf.seek(0)
    return buf
