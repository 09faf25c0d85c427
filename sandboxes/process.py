"""The `process` backend: each exec is a fresh bubblewrap sandbox over a persistent work directory.

For trusted or low-risk work and machines without Docker. Each exec gets new user, pid, net, ipc
and uts namespaces; the host's /usr is bound read-only, the work directory read-write, /tmp is a
private size-limited tmpfs. Because every exec has its own pid namespace, killing its init kills
the whole process tree, whatever it did (setsid, double fork, ignoring SIGTERM), and when the
program ends its leftovers end with it.

As root it also: drops to uid 65534 before bubblewrap, puts the sandbox in its own cgroups
(memory with no swap, pids, CPU quota) and mounts a size-limited tmpfs as the work directory.
Without root those fall back to rlimits (see docs/sandboxes.md for what that weakens).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio
from anyio.abc import ByteSendStream, Process

from sandboxes._base import BASE_PATH, BaseSandbox
from sandboxes._bwrap import UNPRIVILEGED_UID, BwrapLayout, command_line, passwd_text
from sandboxes._cgroup import SandboxCgroup
from sandboxes._errors import BackendUnavailableError, SandboxBrokenError, SandboxStartError
from sandboxes._host_reaper import reap_host_leftovers
from sandboxes._output import CappedBuffer, drain_into
from sandboxes._spec import ExecResult, SandboxSpec, status_to_exit

KILL_GRACE_S = 10.0  # how long a killed tree may take to disappear before we call it broken
MOUNT_TIMEOUT_S = 10.0


class ProcessSandbox(BaseSandbox):
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
            _reap_once(self._base_dir)
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

    async def _mount_work(self, work: Path) -> None:
        opts = f"size={self._spec.disk},mode=0700,uid={UNPRIVILEGED_UID},gid={UNPRIVILEGED_UID}"
        with anyio.fail_after(MOUNT_TIMEOUT_S):
            done = await anyio.run_process(
                ["mount", "-t", "tmpfs", "-o", f"{opts},nosuid,nodev", "roost-work", str(work)],
                check=False,
            )
        if done.returncode != 0:
            raise SandboxStartError(f"cannot mount the work tmpfs: {done.stderr.decode().strip()}")
        self._mounted = True

    async def _run(
        self,
        argv: list[str],
        *,
        stdin: bytes | None,
        timeout: float,
        env: dict[str, str],
        cwd: str,
        output_limit: int,
    ) -> ExecResult:
        assert self._layout is not None
        status_r, status_w = os.pipe()
        os.set_blocking(status_r, False)
        fcntl.fcntl(status_r, fcntl.F_SETFD, fcntl.FD_CLOEXEC)
        cmd = command_line(self._spec, self._layout, argv, env=env, cwd=cwd, status_fd=status_w)
        oom_before = self._cgroup.oom_kills() if self._cgroup else 0
        started = time.monotonic()
        try:
            proc = await anyio.open_process(
                cmd,
                stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
                env={"PATH": BASE_PATH},
                start_new_session=True,
                pass_fds=(status_w,),
            )
        except OSError as exc:
            os.close(status_r)
            return ExecResult.infra(SandboxBrokenError(f"cannot start bubblewrap: {exc}"))
        finally:
            os.close(status_w)
        out, err = CappedBuffer(output_limit), CappedBuffer(output_limit)
        status: dict[str, int] = {}
        timed_out = False
        try:
            with anyio.move_on_after(timeout + KILL_GRACE_S) as guard:
                async with anyio.create_task_group() as tg:
                    assert proc.stdout is not None
                    assert proc.stderr is not None
                    tg.start_soon(drain_into, proc.stdout, out)
                    tg.start_soon(drain_into, proc.stderr, err)
                    tg.start_soon(_read_status, status_r, status)
                    if stdin is not None and proc.stdin is not None:
                        tg.start_soon(_feed, proc.stdin, stdin)
                    with anyio.move_on_after(timeout):
                        await proc.wait()
                    if proc.returncode is None:
                        timed_out = True
                        await self._kill_tree(proc, status)
        finally:
            with anyio.CancelScope(shield=True):
                if proc.returncode is None:
                    await self._kill_tree(proc, status)
                await proc.aclose()
                os.close(status_r)
        duration = time.monotonic() - started
        if guard.cancelled_caught:
            return ExecResult.infra(
                SandboxBrokenError("the killed process tree did not go away"), duration_s=duration
            )
        if "child-pid" not in status:
            detail = err.value().decode(errors="replace").strip()
            return ExecResult.infra(
                SandboxBrokenError(f"bubblewrap could not create the sandbox: {detail}"),
                duration_s=duration,
            )
        oom = self._cgroup is not None and self._cgroup.oom_kills() > oom_before
        common: dict[str, Any] = {
            "stdout": out.value(),
            "stderr": err.value(),
            "stdout_truncated": out.truncated,
            "stderr_truncated": err.truncated,
            "duration_s": duration,
            "oom_killed": oom,
        }
        if timed_out:
            return ExecResult(exit_code=None, timed_out=True, signal=int(signal.SIGKILL), **common)
        exit_code, sig = status_to_exit(status.get("exit-code", proc.returncode or 0))
        return ExecResult(exit_code=exit_code, signal=sig, **common)

    async def _kill_tree(self, proc: Process, status: dict[str, int]) -> None:
        """Kill everything the exec started and wait until it is gone.

        SIGKILL to the namespace's init makes the kernel kill every process in the pid namespace;
        bubblewrap's outer process exits only once that init is reaped, so `wait()` returning
        means the whole tree is gone.
        """
        child = status.get("child-pid")
        if child is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(child, signal.SIGKILL)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        with anyio.move_on_after(KILL_GRACE_S):
            await proc.wait()
        if self._cgroup is not None:
            await self._cgroup.kill_all()

    async def _reset(self) -> None:
        assert self._layout is not None
        await anyio.to_thread.run_sync(_empty_dir, self._layout.work)

    async def _close(self) -> None:
        if self._cgroup is not None:
            await self._cgroup.remove()
            self._cgroup = None
        if self._root is None:
            return
        work = self._root / "work"
        if self._mounted:
            with anyio.move_on_after(MOUNT_TIMEOUT_S):
                await anyio.run_process(["umount", "-l", str(work)], check=False)
            self._mounted = False
        root, self._root = self._root, None
        await anyio.to_thread.run_sync(lambda: shutil.rmtree(root, ignore_errors=True))


_reaped: set[Path] = set()


def _reap_once(base_dir: Path) -> None:
    """Clean up after crashed owners, once per process and base directory."""
    if base_dir not in _reaped:
        _reaped.add(base_dir)
        reap_host_leftovers(base_dir)


def _empty_dir(path: Path) -> None:
    """Delete everything under `path` without following symlinks the sandbox may have planted."""
    for entry in os.scandir(path):
        if entry.is_dir(follow_symlinks=False):
            shutil.rmtree(entry.path)  # fd-based on Linux: immune to symlink races
        else:
            os.unlink(entry.path)


async def _feed(stream: ByteSendStream, data: bytes) -> None:
    """Write stdin and close it; a program that exits without reading it is not an error."""
    with contextlib.suppress(anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
        if data:
            await stream.send(data)
    with contextlib.suppress(anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
        await stream.aclose()


async def _read_status(fd: int, status: dict[str, int]) -> None:
    """Collect bubblewrap's JSON status lines as they come: "child-pid" first (needed to kill the
    tree on timeout), "exit-code" last."""
    pending = b""
    while True:
        await anyio.wait_readable(fd)
        try:
            chunk = os.read(fd, 4096)
        except BlockingIOError:
            continue
        if not chunk:
            return
        pending += chunk
        *lines, pending = pending.split(b"\n")
        for line in lines:
            with contextlib.suppress(ValueError):
                doc = json.loads(line)
                for key in ("child-pid", "exit-code"):
                    if isinstance(doc, dict) and isinstance(doc.get(key), int):
                        status[key] = doc[key]
