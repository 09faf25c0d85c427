"""What a run holds on the host, sampled: open files, threads, processes, containers, cgroups,
mounts, memory and disk. The numbers a leak soak watches for growth.

Every count is scoped to this process and what it made, so other work on the machine does not
blur it: processes are this process's descendants, containers carry this run's id label,
cgroups and mounts are those of the sandboxes this run created (`track`), disk is what is under
the sandboxes' base directory. Reading /proc runs in a worker thread (it is many small reads),
and the Docker query has a deadline.
"""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

import aiodocker
import anyio

from sandboxes._reaper import OWNER, OWNER_LABEL, RUN_ID, RUN_LABEL

__all__ = ["ResourceProbe", "ResourceSample"]

DOCKER_TIMEOUT_S = 10.0
_CGROUP_ROOT = Path("/sys/fs/cgroup")


@dataclasses.dataclass(frozen=True)
class ResourceSample:
    """One reading. `containers` is None when no Docker client was given."""

    elapsed_s: float
    episodes: int
    open_files: int
    threads: int
    processes: int
    containers: int | None
    cgroups: int
    mounts: int
    rss_mb: float
    tree_rss_mb: float
    disk_mb: float


class ResourceProbe:
    """Samples the resources of this process, its children and the sandboxes it tracks."""

    def __init__(self, *, work_root: Path | None, docker: aiodocker.Docker | None = None) -> None:
        self.work_root = work_root
        self.docker = docker
        self._sandbox_ids: set[str] = set()

    def track(self, sandbox_id: str) -> None:
        """Count this sandbox's cgroups and mounts from now on (even after it is closed)."""
        self._sandbox_ids.add(sandbox_id)

    async def sample(self, *, elapsed_s: float, episodes: int) -> ResourceSample:
        host = await anyio.to_thread.run_sync(self._read_host, elapsed_s, episodes)
        if self.docker is None:
            return host
        count, written = await self._containers()
        return dataclasses.replace(host, containers=count, disk_mb=host.disk_mb + written / 2**20)

    async def _containers(self) -> tuple[int, int]:
        """This run's containers, and the bytes written to their writable layers (their work
        directories are tmpfs, counted in memory, not here)."""
        assert self.docker is not None
        labels = [f"{OWNER_LABEL}={OWNER}", f"{RUN_LABEL}={RUN_ID}"]
        with anyio.fail_after(DOCKER_TIMEOUT_S):
            found = await self.docker.containers.list(
                all=True, size=True, filters={"label": labels}
            )
        return len(found), sum(int(c["SizeRw"] or 0) for c in found if "SizeRw" in c)

    def _read_host(self, elapsed_s: float, episodes: int) -> ResourceSample:
        me = os.getpid()
        tree = _descendants(me)
        return ResourceSample(
            elapsed_s=elapsed_s,
            episodes=episodes,
            open_files=len(os.listdir("/proc/self/fd")),
            threads=_status_field(me, "Threads"),
            processes=len(tree),
            containers=None,
            cgroups=self._cgroups(),
            mounts=self._mounts(),
            rss_mb=_status_field(me, "VmRSS") / 1024,
            tree_rss_mb=sum(_status_field(pid, "VmRSS") for pid in (me, *tree)) / 1024,
            disk_mb=_disk_bytes(self.work_root) / 2**20 if self.work_root else 0.0,
        )

    def _cgroups(self) -> int:
        if not self._sandbox_ids:
            return 0
        parents = [_CGROUP_ROOT / "roost", *_CGROUP_ROOT.glob("*/roost")]
        return sum(1 for parent in parents for sid in self._sandbox_ids if (parent / sid).is_dir())

    def _mounts(self) -> int:
        if self.work_root is None:
            return 0
        root = str(self.work_root)
        with open("/proc/self/mounts") as mounts:
            return sum(1 for row in mounts if row.split(" ")[1].startswith(root))


def _descendants(root: int) -> list[int]:
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue  # it ended while we looked
        # The command name may hold spaces and parentheses: the fields start after the last ')'.
        ppid = int(stat.rpartition(")")[2].split()[1])
        children.setdefault(ppid, []).append(int(entry))
    found, todo = [], [root]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def _status_field(pid: int, name: str) -> int:
    """A numeric field of /proc/PID/status (kB for sizes); 0 for a process that is gone."""
    try:
        with open(f"/proc/{pid}/status") as status:
            for row in status:
                if row.startswith(f"{name}:"):
                    return int(row.split()[1])
    except OSError:
        pass
    return 0


def _disk_bytes(root: Path) -> int:
    total = 0
    for path, dirs, files in os.walk(root, onerror=lambda _: None):
        for name in (*dirs, *files):
            try:
                total += os.lstat(os.path.join(path, name)).st_blocks * 512
            except OSError:
                continue
    return total
