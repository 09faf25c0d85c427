"""The kernel's OOM notices for one memory cgroup (cgroup v1), kept after the cgroup is gone.

Why: a gVisor container whose program outgrows its memory limit dies as a whole (the OOM killer
takes the sentry). Docker's `OOMKilled` flag for it usually follows, but not always (a CI run
waited 15 s for one that never came), and the cgroup's own `oom_kill` counter disappears with the
cgroup tens of milliseconds after the kill. An eventfd registered through `cgroup.event_control`
outlives the cgroup: the kernel signals it once per OOM episode and once more when the cgroup is
removed, so a count of two, or of one while the cgroup still exists, means the cgroup ran out of
memory. Measured here: an OOM-killed container's eventfd reads 2, a container stopped normally 1.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path


class OomNotices:
    """An eventfd the kernel signals when the memory cgroup of `oom_control` hits its limit."""

    def __init__(self, event_fd: int, control_fd: int, oom_control: Path) -> None:
        self._event_fd = event_fd
        self._control_fd = control_fd
        self._oom_control = oom_control
        self._signals = 0
        self._seen = False

    @classmethod
    def register(cls, oom_control: Path) -> OomNotices | None:
        """Register for the notices of the cgroup whose v1 `memory.oom_control` this is; None
        where that is not possible (cgroup v2, not root, the cgroup already gone)."""
        if oom_control.name != "memory.oom_control":
            return None
        notices = cls(os.eventfd(0, os.EFD_NONBLOCK | os.EFD_CLOEXEC), -1, oom_control)
        try:
            notices._control_fd = os.open(oom_control, os.O_RDONLY | os.O_CLOEXEC)
            (oom_control.parent / "cgroup.event_control").write_text(
                f"{notices._event_fd} {notices._control_fd}"
            )
        except OSError:
            notices.close()
            return None
        return notices

    def seen(self) -> bool:
        """Whether the cgroup has been out of memory since `register` (never blocks)."""
        with contextlib.suppress(BlockingIOError, OSError):
            self._signals += os.eventfd_read(self._event_fd)
        # The removal's signal comes after the cgroup's files are gone (and can trail their
        # going), so one signal while they still exist is an OOM notice; two are one whatever
        # the order. Remembered: after the removal, one signal alone says nothing.
        if not self._seen:
            self._seen = self._signals >= 2 or (self._signals == 1 and self._oom_control.exists())
        return self._seen

    def undecided(self) -> bool:
        """One signal and the cgroup gone: an OOM whose removal signal is still on its way
        (the kernel sends it after an RCU grace period), or the removal's signal alone. Worth
        a short wait where the answer matters."""
        return not self.seen() and self._signals == 1 and not self._oom_control.exists()

    def close(self) -> None:
        for fd in (self._event_fd, self._control_fd):
            if fd >= 0:
                with contextlib.suppress(OSError):
                    os.close(fd)
        self._event_fd = self._control_fd = -1
