"""The `process` backend: one bubblewrap sandbox per sandbox, its exec helper inside.

For trusted or low-risk work and machines without Docker. The sandbox gets new user, pid, net,
ipc and uts namespaces; the host's /usr is bound read-only, the work directory read-write, /tmp is
a private size-limited tmpfs. Inside runs the exec helper (`_helper_main.py`), which starts each
command with a fork and an exec and, when it ends or times out, kills every other process in the
pid namespace (setsid, double forks and TERM-ignoring children included). If the helper is lost,
bubblewrap is killed, and with its init the whole pid namespace.

As root it also: drops to uid 65534 before bubblewrap, puts the sandbox in its own cgroups
(memory with no swap, pids, CPU quota) and mounts a size-limited tmpfs as the work directory.
Without root those fall back to rlimits (see docs/sandboxes.md for what that weakens).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import tempfile
from pathlib import Path

import anyio
import anyio.to_thread
import structlog

from sandboxes._base import BASE_PATH
from sandboxes._bwrap import UNPRIVILEGED_UID, BwrapLayout, command_line, passwd_text
from sandboxes._cgroup import SandboxCgroup
from sandboxes._errors import BackendUnavailableError, SandboxStartError
from sandboxes._helper import HELPER_ARGV, Helper, HelperLostError
from sandboxes._helper_sandbox import HelperSandbox
from sandboxes._host_reaper import reap_host_leftovers
from sandboxes._spawn import SpawnedProcess, run, spawn
from sandboxes._spec import SandboxSpec

log = structlog.get_logger(__name__)

HELPER_START_TIMEOUT_S = 30.0
KILL_GRACE_S = 10.0  # how long a killed tree may take to disappear before we call it broken
EXIT_WAIT_S = 2.0  # bubblewrap's init exits as soon as the helper does; wait this long for it
MOUNT_TIMEOUT_S = 10.0


class ProcessSandbox(HelperSandbox):
    """A `Sandbox` made of bubblewrap namespaces, rlimits and (as root) cgroups."""

    def __init__(
        self, spec: SandboxSpec, *, base_dir: str | os.PathLike[str] | None = None
    ) -> None:
        super().__init__(spec)
        self._base_dir = Path(base_dir) if base_dir is not None else Path(tempfile.gettempdir())
        self._root: Path | None = None
        self._mounted = False
        self._cgroup: SandboxCgroup | None = None
        self._layout: BwrapLayout | None = None
        self._proc: SpawnedProcess | None = None

    @property
    def host_workdir(self) -> Path | None:
        """The host directory behind the sandbox's work directory (for tests and debugging)."""
        return self._layout.work if self._layout else None

    @property
    def cgroup(self) -> SandboxCgroup | None:
        return self._cgroup

    @property
    def memory_by_cgroup(self) -> bool:
        """Whether memory is bounded by a cgroup (an OOM kill) or only by RLIMIT_AS."""
        return self._cgroup is not None

    @property
    def disk_by_mount(self) -> bool:
        """Whether the work directory is a size-limited tmpfs or only RLIMIT_FSIZE applies."""
        return self._mounted

    async def _start(self) -> None:
        bwrap = shutil.which("bwrap")
        if bwrap is None:
            raise BackendUnavailableError("bubblewrap (bwrap) is not installed")
        is_root = os.geteuid() == 0
        setpriv = shutil.which("setpriv") if is_root else None
        if is_root and setpriv is None:
            # Without it the sandbox's uid would map to host root: refuse rather than weaken.
            raise BackendUnavailableError("running as root needs setpriv (util-linux)")
        spec = self._spec
        try:
            await _reap_once(self._base_dir)
            self._root = Path(
                tempfile.mkdtemp(prefix=f"roost-{self._id}-p{os.getpid()}-", dir=self._base_dir)
            )
            # 0711: the unprivileged bubblewrap may pass through, nobody may list it.
            self._root.chmod(0o711)
            work, etc = self._root / "work", self._root / "etc"
            work.mkdir(mode=0o700)
            etc.mkdir(mode=0o755)
            passwd, group = passwd_text(spec)
            (etc / "passwd").write_text(passwd)
            (etc / "group").write_text(group)
            if is_root:
                os.chown(work, UNPRIVILEGED_UID, UNPRIVILEGED_UID)
                await self._mount_work(work)
                self._cgroup = SandboxCgroup.create(
                    f"{self._id}", memory=spec.memory, pids=spec.pids, cpus=spec.cpus
                )
        except OSError as exc:
            raise SandboxStartError(f"cannot prepare the sandbox directory: {exc}") from exc
        self._layout = BwrapLayout(
            bwrap=bwrap,
            setpriv=setpriv,
            work=work,
            etc=etc,
            cgroup_procs=tuple(self._cgroup.procs_files) if self._cgroup else (),
            memory_by_cgroup=self._cgroup is not None,
            disk_by_mount=self._mounted,
        )
        await self._open_first_helper()

    async def _mount_work(self, work: Path) -> None:
        opts = f"size={self._spec.disk},mode=0700,uid={UNPRIVILEGED_UID},gid={UNPRIVILEGED_UID}"
        argv = ["mount", "-t", "tmpfs", "-o", f"{opts},nosuid,nodev", "roost-work", str(work)]
        try:
            done = await run(argv, timeout=MOUNT_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            raise SandboxStartError(f"mount did not finish in {MOUNT_TIMEOUT_S} s") from None
        if done.returncode != 0:
            raise SandboxStartError(f"cannot mount the work tmpfs: {done.stderr.decode().strip()}")
        self._mounted = True

    async def _open_helper(self) -> Helper:
        """Start the exec helper in a new bubblewrap sandbox (namespaces, rlimits, cgroups).

        The helper's stderr goes to a file beside the work directory, read only to explain a
        helper that failed to start.
        """
        assert self._layout is not None
        assert self._root is not None
        cmd = command_line(
            self._spec,
            self._layout,
            HELPER_ARGV,
            env=self._environment(None),
            cwd=self._spec.workdir,
        )
        log_path = self._root / "helper.log"
        try:
            with log_path.open("wb") as log_file:
                proc = await spawn(
                    cmd, stderr=log_file, env={"PATH": BASE_PATH}, start_new_session=True
                )
        except OSError as exc:
            raise SandboxStartError(f"cannot start bubblewrap: {exc}") from exc
        self._proc = proc
        helper = Helper(_ProcessTransport(proc))
        try:
            with anyio.fail_after(HELPER_START_TIMEOUT_S):
                await helper.hello()
        except (TimeoutError, HelperLostError):
            with anyio.CancelScope(shield=True):
                await self._drop_helper()
            detail = log_path.read_text(errors="replace").strip()[-500:]
            raise SandboxStartError(f"the exec helper did not start: {detail}") from None
        return helper

    async def _drop_helper(self) -> None:
        """Kill bubblewrap: the namespace's init dies with it (--die-with-parent), and with the
        init every process in the pid namespace. The cgroup confirms that none is left."""
        proc, self._proc = self._proc, None
        if self._helper is not None:
            self._helper.alive = False
        if proc is None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        with anyio.move_on_after(KILL_GRACE_S):
            await proc.wait()
        if self._cgroup is not None:
            await self._cgroup.kill_all()
        proc.close_pipes()

    async def _helper_exit_status(self) -> int | None:
        """Bubblewrap ends with its child's status: 128+N when the helper inside was killed by
        signal N. A negative return code means bubblewrap itself was killed (from the host)."""
        proc = self._proc
        if proc is None:
            return None
        with anyio.move_on_after(EXIT_WAIT_S):
            await proc.wait()
        code = proc.returncode
        return code if code is not None and code >= 0 else None

    async def _helper_stopped(self) -> bool:
        if self._proc is None or self._helper is None:
            return False
        return _stopped_in_namespace(self._proc.pid, self._helper.pid)

    def _oom_kills(self) -> int:
        return self._cgroup.oom_kills() if self._cgroup is not None else 0

    def _size_limited_dirs(self) -> list[str]:
        dirs = self._writable_dirs()
        return dirs if self._mounted else dirs[1:]  # the work directory is a tmpfs only as root

    async def _close(self) -> None:
        await self._drop_helper()
        if self._cgroup is not None:
            await self._cgroup.remove()
            self._cgroup = None
        if self._root is None:
            return
        work = self._root / "work"
        if self._mounted:
            with contextlib.suppress(subprocess.TimeoutExpired):
                await run(["umount", "-l", str(work)], timeout=MOUNT_TIMEOUT_S)
            self._mounted = False
        root, self._root = self._root, None
        await anyio.to_thread.run_sync(lambda: shutil.rmtree(root, ignore_errors=True))


_reaped: set[Path] = set()


def _stopped_in_namespace(root: int, inner_pid: int) -> bool:
    """Whether the descendant of host process `root` whose pid in its own namespace is
    `inner_pid` (the helper, under bubblewrap's init) is stopped. A few small /proc reads."""
    todo, looked = [root], 0
    while todo and looked < 16:  # bubblewrap, its init, the helper: never deep
        pid = todo.pop()
        looked += 1
        try:
            status = Path(f"/proc/{pid}/status").read_text()
            children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
        except OSError:
            continue
        fields = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
        nspids = fields.get("NSpid", "").split()
        if pid != root and len(nspids) > 1 and nspids[-1] == str(inner_pid):
            return fields.get("State", "").strip()[:1] in ("T", "t")
        todo.extend(int(child) for child in children)
    return False


async def _reap_once(base_dir: Path) -> None:
    """Clean up after crashed owners, once per process and base directory.

    In a worker thread: after a crash there may be many leftovers, each an unmount and a tree
    to delete, and the loop must not stall on them. A cancelled start stops waiting and leaves
    the thread to finish; the leftovers it removes belong to dead owners only.
    """
    if base_dir in _reaped:
        return
    _reaped.add(base_dir)
    try:
        await anyio.to_thread.run_sync(reap_host_leftovers, base_dir, abandon_on_cancel=True)
    except OSError as exc:  # best effort: a leftover costs disk, not correctness
        log.warning("process_reaper.failed", base_dir=str(base_dir), error=str(exc))


class _ProcessTransport:
    """The helper's stdin and stdout pipes."""

    def __init__(self, proc: SpawnedProcess) -> None:
        self._proc = proc

    async def send(self, data: bytes) -> None:
        try:
            await self._proc.send(data)
        except (OSError, anyio.ClosedResourceError) as exc:
            raise OSError(f"helper stdin closed: {exc!r}") from None

    async def receive(self) -> bytes:
        try:
            return await self._proc.receive(65536)
        except (OSError, anyio.ClosedResourceError):
            return b""
