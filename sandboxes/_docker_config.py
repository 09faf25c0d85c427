"""The container a docker or gvisor sandbox runs in, as Docker API JSON, and where its memory
cgroup lives on the host (for OOM detection)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sandboxes._reaper import container_labels
from sandboxes._spec import MiB, SandboxSpec

TMP_SIZE = 16 * MiB


def container_config(
    spec: SandboxSpec, *, sandbox_id: str, image: str, runtime: str
) -> dict[str, Any]:
    """Docker create-container JSON: non-root user, no capabilities, no new privileges, memory
    with swap equal to memory, CPU quota, pids limit, no network, read-only root filesystem with
    size-limited tmpfs for the work directory and /tmp, labels for the reaper."""
    tmpfs_opts = "rw,nosuid,nodev"
    ulimits = [
        {"Name": "nofile", "Soft": 1024, "Hard": 1024},
        {"Name": "core", "Soft": 0, "Hard": 0},
    ]
    if runtime == "runsc":
        # Under gVisor the host pids cgroup counts the sentry's own threads and its ptrace stubs
        # (about 6 host tasks per sandboxed process here), and the sentry panics when it cannot
        # create one. So the host limit only backstops, and the real per-sandbox process limit is
        # RLIMIT_NPROC, which gVisor enforces inside its own kernel (it counts nothing on the host).
        pids_limit = max(4096, spec.pids * 64)
        ulimits.append({"Name": "nproc", "Soft": spec.pids, "Hard": spec.pids})
    else:
        # Not RLIMIT_NPROC under runc: it would count every host process of the same uid.
        pids_limit = spec.pids
    return {
        "Image": image,
        "User": spec.user,
        "WorkingDir": spec.workdir,
        "Env": [f"{k}={v}" for k, v in spec.env.items()],
        "Hostname": "roost",
        "NetworkDisabled": not spec.network,
        "Labels": container_labels(sandbox_id, lifetime_s=spec.lifetime_s, backend=spec.backend),
        "HostConfig": {
            "Runtime": runtime,
            "NetworkMode": "default" if spec.network else "none",
            "CapDrop": ["ALL"],
            "SecurityOpt": ["no-new-privileges"],
            "Memory": spec.memory,
            "MemorySwap": spec.memory,
            "NanoCpus": int(spec.cpus * 1e9),
            "PidsLimit": pids_limit,
            "ReadonlyRootfs": True,
            "Tmpfs": {
                spec.workdir: f"{tmpfs_opts},size={spec.disk},uid={spec.uid},gid={spec.gid}",
                "/tmp": f"{tmpfs_opts},size={TMP_SIZE},mode=1777",
            },
            "IpcMode": "private",
            "ShmSize": 16 * MiB,
            "Ulimits": ulimits,
            "Init": False,
            "AutoRemove": False,
            "RestartPolicy": {"Name": "no"},
            "LogConfig": {"Type": "none", "Config": {}},
        },
    }


def memory_events_file(pid: int) -> Path | None:
    """The host file counting OOM kills in the memory cgroup of host process `pid`, if readable.

    v1: `<memory mount>/<path>/memory.oom_control`; v2: `/sys/fs/cgroup/<path>/memory.events`.
    """
    try:
        lines = Path(f"/proc/{pid}/cgroup").read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        _, controllers, path = line.split(":", 2)
        if "memory" in controllers.split(","):
            candidate = Path("/sys/fs/cgroup/memory") / path.lstrip("/") / "memory.oom_control"
            if candidate.exists():
                return candidate
    for line in lines:
        if line.startswith("0::"):
            candidate = Path("/sys/fs/cgroup") / line[3:].lstrip("/") / "memory.events"
            if candidate.exists():
                return candidate
    return None
