"""Leftovers of process-backend sandboxes whose owning process died without closing them.

Each sandbox's host directory is named `roost-<sandbox id>-p<owner pid>-<random>`; when the owner
pid no longer exists, its tmpfs mount, directory and cgroups are removed. Run once per process, at
the first process-backend start (the docker backend's equivalent is `_reaper.reap`).
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import subprocess
from pathlib import Path

import structlog

from sandboxes._cgroup import PARENT, ROOT

log = structlog.get_logger(__name__)

UMOUNT_TIMEOUT_S = 10.0
_NAME = re.compile(r"^roost-([0-9a-f]+)-p(\d+)-")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def reap_host_leftovers(base_dir: Path) -> list[str]:
    """Remove sandboxes under `base_dir` whose owner process is gone; returns their ids."""
    removed = []
    for entry in base_dir.glob("roost-*-p*-*"):
        match = _NAME.match(entry.name)
        if match is None or _alive(int(match.group(2))):
            continue
        work = entry / "work"
        try:
            if os.path.ismount(work):
                subprocess.run(["umount", "-l", str(work)], check=False, timeout=UMOUNT_TIMEOUT_S)
        except (OSError, subprocess.SubprocessError) as exc:
            # Leave this one for a later run's reaper; removing its directory under a live
            # mount would empty the mount, not free it.
            log.warning("process_reaper.umount_failed", sandbox=match.group(1), error=str(exc))
            continue
        shutil.rmtree(entry, ignore_errors=True)
        for controller in ("memory", "pids", "cpu", ""):
            with contextlib.suppress(OSError):
                (ROOT / controller / PARENT / match.group(1)).rmdir()
        removed.append(match.group(1))
    if removed:
        log.info("process_reaper.removed", sandboxes=removed)
    return removed
