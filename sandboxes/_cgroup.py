"""Per-sandbox cgroups for the process backend (root only): memory, pids and CPU limits, an OOM
counter, and a way to kill every process of the sandbox.

Works on the unified hierarchy (cgroup v2) and on the legacy one (v1, as on the machine this was
written on: memory, pids and cpu mounted separately, /sys/fs/cgroup/unified without controllers).
When neither is writable, `SandboxCgroup.create` returns None and the caller falls back to
rlimits; `cgroup_support()` says which case applies so docs and `roost sandbox check` can tell.
"""

from __future__ import annotations

import contextlib
import os
import signal
from pathlib import Path

import anyio
import structlog

log = structlog.get_logger(__name__)

ROOT = Path("/sys/fs/cgroup")
PARENT = "roost"
_V1_CONTROLLERS = ("memory", "pids", "cpu")


def _v2_available() -> bool:
    controllers = ROOT / "cgroup.controllers"
    if not controllers.exists():
        return False
    have = set(controllers.read_text().split())
    return {"memory", "pids"} <= have and os.access(ROOT, os.W_OK)


def _v1_available() -> bool:
    return all(os.access(ROOT / c, os.W_OK) for c in ("memory", "pids"))


def cgroup_support() -> str:
    """ "v2", "v1", or "none" (not root, or no writable memory and pids controllers)."""
    if os.geteuid() != 0:
        return "none"
    if _v2_available():
        return "v2"
    if _v1_available():
        return "v1"
    return "none"


def oom_kill_count(path: Path) -> int:
    """The `oom_kill` counter of a v1 `memory.oom_control` or v2 `memory.events` file (0 if
    unreadable)."""
    try:
        for line in path.read_text().splitlines():
            key, _, value = line.partition(" ")
            if key == "oom_kill":
                return int(value)
    except (OSError, ValueError):
        pass
    return 0


def _write(path: Path, value: str) -> None:
    path.write_text(value)


class SandboxCgroup:
    """The cgroup (v2) or set of cgroups (v1, one per controller) of one sandbox."""

    def __init__(self, version: str, dirs: dict[str, Path]) -> None:
        self.version = version
        self._dirs = dirs  # controller -> directory; v2 uses the key "unified"

    @classmethod
    def create(cls, name: str, *, memory: int, pids: int, cpus: float) -> SandboxCgroup | None:
        """Create and configure the cgroup(s), or return None when cgroups are unavailable."""
        version = cgroup_support()
        try:
            if version == "v2":
                return cls._create_v2(name, memory=memory, pids=pids, cpus=cpus)
            if version == "v1":
                return cls._create_v1(name, memory=memory, pids=pids, cpus=cpus)
        except OSError as exc:
            log.warning("cgroup.unavailable", error=str(exc))
        return None

    @classmethod
    def _create_v2(cls, name: str, *, memory: int, pids: int, cpus: float) -> SandboxCgroup:
        parent = ROOT / PARENT
        parent.mkdir(exist_ok=True)
        wanted = {"memory", "pids", "cpu"} & set((ROOT / "cgroup.controllers").read_text().split())
        for where in (ROOT, parent):
            enabled = set((where / "cgroup.subtree_control").read_text().split())
            missing = wanted - enabled
            if missing:
                _write(where / "cgroup.subtree_control", " ".join(f"+{c}" for c in missing))
        leaf = parent / name
        leaf.mkdir()
        group = cls("v2", {"unified": leaf})
        try:
            _write(leaf / "memory.max", str(memory))
            if (leaf / "memory.swap.max").exists():
                _write(leaf / "memory.swap.max", "0")
            _write(leaf / "pids.max", str(pids))
            if (leaf / "cpu.max").exists():
                _write(leaf / "cpu.max", f"{int(cpus * 100_000)} 100000")
        except OSError:
            group.remove_now()
            raise
        return group

    @classmethod
    def _create_v1(cls, name: str, *, memory: int, pids: int, cpus: float) -> SandboxCgroup:
        dirs: dict[str, Path] = {}
        group = cls("v1", dirs)
        try:
            for ctrl in _V1_CONTROLLERS:
                base = ROOT / ctrl
                if not os.access(base, os.W_OK):
                    continue
                leaf = base / PARENT / name
                leaf.mkdir(parents=True)
                dirs[ctrl] = leaf
            mem = dirs["memory"]
            _write(mem / "memory.limit_in_bytes", str(memory))
            # Swap would let a memory bomb run on past the limit instead of being OOM-killed.
            if (mem / "memory.memsw.limit_in_bytes").exists():
                _write(mem / "memory.memsw.limit_in_bytes", str(memory))
            _write(dirs["pids"] / "pids.max", str(pids))
            if "cpu" in dirs:
                _write(dirs["cpu"] / "cpu.cfs_period_us", "100000")
                _write(dirs["cpu"] / "cpu.cfs_quota_us", str(int(cpus * 100_000)))
        except (OSError, KeyError):
            group.remove_now()
            raise
        return group

    @property
    def procs_files(self) -> list[str]:
        """Files a process writes its pid into to join every controller of this sandbox."""
        return [str(d / "cgroup.procs") for d in self._dirs.values()]

    def oom_kills(self) -> int:
        """How many processes the kernel has OOM-killed in this cgroup so far."""
        if self.version == "v2":
            return oom_kill_count(self._dirs["unified"] / "memory.events")
        return oom_kill_count(self._dirs["memory"] / "memory.oom_control")

    def pids(self) -> list[int]:
        first = next(iter(self._dirs.values()))
        try:
            return [int(p) for p in (first / "cgroup.procs").read_text().split()]
        except OSError:
            return []

    async def kill_all(self, *, deadline_s: float = 5.0) -> bool:
        """SIGKILL every process in the cgroup until none is left. True when it is empty."""
        with anyio.move_on_after(deadline_s):
            while True:
                pids = self.pids()
                if not pids:
                    return True
                for pid in pids:
                    with contextlib.suppress(ProcessLookupError, PermissionError):
                        os.kill(pid, signal.SIGKILL)
                # Killed processes leave the cgroup asynchronously; give them a moment.
                await anyio.sleep(0.005)
        return not self.pids()

    def remove_now(self) -> None:
        for leaf in self._dirs.values():
            with contextlib.suppress(OSError):
                leaf.rmdir()

    async def remove(self) -> None:
        await self.kill_all()
        self.remove_now()
