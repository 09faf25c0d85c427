"""Runtimes: the images sandboxes run in, named by a key (`python`, `shell`) and tagged by the
hash of everything that goes into them, so a changed recipe is a new tag and an unchanged one is
never rebuilt.

All runtimes share one base: a Debian root filesystem from
`debootstrap --variant=minbase --include=python3 bookworm` (not python3-minimal, which lacks json,
decimal, fractions and statistics), with an unprivileged user `sandbox` (uid 1000) added. Each
runtime is a `docker build` layer on top that adds roost's init and its own environment. No layer
needs the network (none is reachable during a build here).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass

from sandboxes._errors import SandboxConfigError

BASE_RECIPE = {
    "recipe": 1,
    "suite": "bookworm",
    "variant": "minbase",
    "include": ["python3"],
    "user": {"name": "sandbox", "uid": 1000, "gid": 1000, "home": "/work"},
}

# PID 1 of every container. It reaps orphans (they would otherwise fill the pids limit as
# zombies) and, on SIGUSR1, kills every other process in the container. That is how an exec that
# timed out is killed even when a fork bomb has used up the pids limit: a signal to PID 1 needs
# no new process, whereas `docker exec` of a killer would fail to fork.
INIT_PY = r'''"""roost sandbox init: reap orphans; SIGUSR1 kills all other processes; TERM exits."""
import os
import signal
import sys
import time

WANTED = {signal.SIGCHLD, signal.SIGTERM, signal.SIGINT, signal.SIGUSR1}


def reap():
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def alive_others():
    pids = []
    for name in os.listdir("/proc"):
        if not name.isdigit() or name == "1":
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as f:
                state = f.read().rpartition(b")")[2].split()[0]
        except (OSError, IndexError):
            continue
        if state != b"Z":
            pids.append(int(name))
    return pids


def kill_others():
    # Scan /proc and kill until a scan finds nobody (not kill(-1): gVisor's kills PID 1 too).
    # Reaping in between lets the killed ones, reparented to us, disappear.
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        pids = alive_others()
        if not pids:
            return
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        reap()


for sig in WANTED:
    # A handler (not SIG_DFL) so that signals from outside the pid namespace reach PID 1.
    signal.signal(sig, lambda *_: None)
signal.pthread_sigmask(signal.SIG_BLOCK, WANTED)
while True:
    reap()
    got = signal.sigwaitinfo(WANTED).si_signo
    if got in (signal.SIGTERM, signal.SIGINT):
        sys.exit(0)
    if got == signal.SIGUSR1:
        kill_others()
'''

INIT_PATH = "/usr/local/lib/roost/init.py"


@dataclass(frozen=True)
class Runtime:
    """A runtime key, the extra Dockerfile lines of its image, and how it runs a program file."""

    name: str
    description: str
    dockerfile_extra: tuple[str, ...]
    run_file: tuple[str, ...]

    def command_for(self, path: str) -> list[str]:
        """argv that runs the program file at `path` in this runtime."""
        return [*self.run_file, path]


RUNTIMES: dict[str, Runtime] = {
    "python": Runtime(
        name="python",
        description="Python 3.11 (Debian bookworm python3, full standard library)",
        dockerfile_extra=("ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1",),
        run_file=("python3",),
    ),
    "shell": Runtime(
        name="shell",
        description="bash and coreutils (Debian bookworm minbase)",
        dockerfile_extra=("ENV SHELL=/bin/bash",),
        run_file=("bash",),
    ),
}


def get_runtime(name: str) -> Runtime:
    try:
        return RUNTIMES[name]
    except KeyError:
        known = ", ".join(sorted(RUNTIMES))
        raise SandboxConfigError(f"runtime: unknown runtime {name!r} (known: {known})") from None


def _digest(*parts: str) -> str:
    h = hashlib.sha256()
    for part in parts:
        h.update(part.encode())
        h.update(b"\0")
    return h.hexdigest()[:12]


def base_key() -> str:
    return _digest(json.dumps(BASE_RECIPE, sort_keys=True))


def base_tag() -> str:
    return f"roost-base:{base_key()}"


def dockerfile(runtime: Runtime) -> str:
    user = BASE_RECIPE["user"]
    assert isinstance(user, dict)
    lines = [
        f"FROM {base_tag()}",
        f"COPY init.py {INIT_PATH}",
        "ENV LANG=C.UTF-8 HOME=/work",
        f"ENV ROOST_RUNTIME={runtime.name}",
        *runtime.dockerfile_extra,
        f"LABEL roost.owner=roost roost.runtime={runtime.name}",
        f"USER {user['uid']}:{user['gid']}",
        "WORKDIR /work",
        f'CMD ["python3", "-I", "{INIT_PATH}"]',
    ]
    return "\n".join(lines) + "\n"


def image_tag(runtime_name: str) -> str:
    """The content-addressed tag of a runtime's image, e.g. `roost-python:3f2a...`."""
    runtime = get_runtime(runtime_name)
    return f"roost-{runtime.name}:{_digest(base_tag(), dockerfile(runtime), INIT_PY)}"
