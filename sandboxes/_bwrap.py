"""The command line that runs one exec of the process backend under bubblewrap.

Layers, outermost first (each `exec`s the next, so the whole chain is one process):

    sh -c 'join cgroups'   (root with cgroups only: the pid joins the sandbox's cgroups)
    setpriv --reuid=65534  (root only: bubblewrap and everything below run unprivileged)
    bwrap ...              (new user, pid, net, ipc, uts namespaces; read-only system binds)
    prlimit ...            (inside the namespaces: per-sandbox rlimits, see below)
    the program

rlimits are set inside the new user namespace on purpose: the kernel counts RLIMIT_NPROC per user
per namespace level, and a limit set before bwrap would also cap every *other* process of the same
host user.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from sandboxes._spec import MiB, SandboxSpec

SHM_SIZE = 16 * MiB  # /dev/shm, as docker's default
UNPRIVILEGED_UID = 65534  # "nobody": what sandboxed processes are on the host when roost is root
_SYSTEM_DIRS = ("bin", "sbin", "lib", "lib32", "lib64", "libx32")
_ETC_FILES = (
    "/etc/ld.so.cache",
    "/etc/ld.so.conf",
    "/etc/ld.so.conf.d",
    "/etc/alternatives",
    "/etc/localtime",
    "/etc/nsswitch.conf",
)
_JOIN_CGROUPS = (
    'for f do [ "$f" = -- ] && break; echo $$ > "$f" || exit 125; shift; done; shift; exec "$@"'
)


@dataclass(frozen=True)
class BwrapLayout:
    """Host-side paths and facts one sandbox's command lines are built from."""

    bwrap: str
    setpriv: str | None  # set when running as root: drop to UNPRIVILEGED_UID before bwrap
    work: Path  # host directory bound at spec.workdir
    etc: Path  # host directory holding the sandbox's passwd and group
    cgroup_procs: tuple[str, ...]  # empty when no cgroup
    memory_by_cgroup: bool
    disk_by_mount: bool


def system_binds() -> list[str]:
    """Read-only binds of the host's system directories (symlinks on merged-/usr hosts)."""
    args = ["--ro-bind", "/usr", "/usr"]
    for name in _SYSTEM_DIRS:
        host = Path("/") / name
        if host.is_symlink():
            args += ["--symlink", os.readlink(host), str(host)]
        elif host.is_dir():
            args += ["--ro-bind", str(host), str(host)]
    for path in _ETC_FILES:
        args += ["--ro-bind-try", path, path]
    return args


def rlimit_args(spec: SandboxSpec, layout: BwrapLayout) -> list[str]:
    args = ["prlimit", f"--nproc={spec.pids}", "--nofile=1024", "--core=0"]
    if not layout.memory_by_cgroup:
        # Without a memory cgroup the address-space limit is the only memory bound we have.
        args.append(f"--as={spec.memory}")
    if not layout.disk_by_mount:
        # Without a size-limited mount, cap each file; the total is not bounded (weaker).
        args.append(f"--fsize={spec.disk}")
    return [*args, "--"]


def command_line(
    spec: SandboxSpec,
    layout: BwrapLayout,
    argv: list[str],
    *,
    env: dict[str, str],
    cwd: str,
    status_fd: int | None = None,
) -> list[str]:
    """The full argv for one exec of `argv` in the sandbox described by `spec` and `layout`."""
    outer: list[str] = []
    if layout.cgroup_procs:
        outer += ["/bin/sh", "-c", _JOIN_CGROUPS, "roost-join", *layout.cgroup_procs, "--"]
    if layout.setpriv is not None:
        outer += [
            layout.setpriv,
            f"--reuid={UNPRIVILEGED_UID}",
            f"--regid={UNPRIVILEGED_UID}",
            "--clear-groups",
            "--",
        ]
    bwrap = [
        layout.bwrap,
        "--unshare-user",
        "--unshare-pid",
        "--unshare-ipc",
        "--unshare-uts",
        "--unshare-cgroup-try",
        *([] if spec.network else ["--unshare-net"]),
        "--disable-userns",
        "--uid",
        str(spec.uid),
        "--gid",
        str(spec.gid),
        "--hostname",
        "roost",
        "--die-with-parent",
        "--new-session",
        "--cap-drop",
        "ALL",
        *system_binds(),
        "--ro-bind",
        str(layout.etc / "passwd"),
        "/etc/passwd",
        "--ro-bind",
        str(layout.etc / "group"),
        "/etc/group",
        "--proc",
        "/proc",
        "--dev",
        "/dev",
        "--size",
        str(SHM_SIZE),
        "--tmpfs",
        "/dev/shm",
        "--remount-ro",
        "/dev",
        "--size",
        str(spec.disk),
        "--tmpfs",
        "/tmp",
        "--bind",
        str(layout.work),
        spec.workdir,
        # Last of the mounts: bubblewrap's root tmpfs (`/`, `/etc`, any new top-level directory)
        # becomes read-only, as /dev did above, so that the only writable paths are the work
        # directory, /tmp and /dev/shm: size-limited tmpfs, emptied by every reset.
        "--remount-ro",
        "/",
        "--chdir",
        cwd,
        *([] if status_fd is None else ["--json-status-fd", str(status_fd)]),
        "--clearenv",
    ]
    for key, value in env.items():
        bwrap += ["--setenv", key, value]
    return [*outer, *bwrap, "--", *rlimit_args(spec, layout), *argv]


def passwd_text(spec: SandboxSpec) -> tuple[str, str]:
    """Contents of /etc/passwd and /etc/group inside the sandbox."""
    passwd = (
        f"root:x:0:0:root:/root:/bin/sh\nsandbox:x:{spec.uid}:{spec.gid}::{spec.workdir}:/bin/sh\n"
    )
    group = f"root:x:0:\nsandbox:x:{spec.gid}:\n"
    return passwd, group
