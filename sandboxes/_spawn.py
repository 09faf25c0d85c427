"""Child processes started without copying this process's page tables.

uvloop starts a child with libuv's fork(): the kernel copies the parent's page tables, and a
trainer that holds torch and a model maps gigabytes, so each start costs 20 ms (100 MiB
resident) to 100 ms (2 GiB) and more with a CUDA context, while the event loop and the GIL are
held. Filling a pool of 256 process sandboxes (a mount and a bubblewrap each) stalled the loop
for tens of seconds. CPython's `subprocess` uses vfork(): the child borrows the parent's memory
until it execs, which costs about a millisecond at any size (`scripts/bench_spawn.py`).

So the process backend starts its children with `subprocess.Popen` and does the waiting and the
pipe I/O itself, on non-blocking descriptors the event loop watches: `spawn` for the long-lived
helper, `run` for short commands.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Mapping, Sequence
from typing import IO

import anyio
import anyio.lowlevel
import anyio.to_thread

__all__ = ["SpawnedProcess", "run", "spawn"]

_POLL_S = 0.01  # how often to look for an exit where the kernel has no pidfd


class SpawnedProcess:
    """A child started by `spawn`: its pid, its pipes (when asked for) and its exit."""

    def __init__(self, popen: subprocess.Popen[bytes]) -> None:
        self._popen = popen
        self._stdin = _take_fd(popen.stdin)
        self._stdout = _take_fd(popen.stdout)

    @property
    def pid(self) -> int:
        return self._popen.pid

    @property
    def returncode(self) -> int | None:
        """The exit status once `wait` has seen the exit (negative: killed by that signal)."""
        return self._popen.returncode

    async def send(self, data: bytes) -> None:
        """Write all of `data` to the child's stdin.

        :raises OSError: stdin was not piped, is closed, or the child closed its end.
        """
        if self._stdin is None:
            raise OSError("stdin is not open")
        view = memoryview(data)
        while view:
            try:
                view = view[os.write(self._stdin, view) :]
            except BlockingIOError:
                await anyio.wait_writable(self._stdin)

    async def receive(self, max_bytes: int = 65536) -> bytes:
        """Up to `max_bytes` from the child's stdout; b"" once it is closed.

        :raises OSError: stdout was not piped or is closed here.
        """
        if self._stdout is None:
            raise OSError("stdout is not open")
        while True:
            try:
                return os.read(self._stdout, max_bytes)
            except BlockingIOError:
                await anyio.wait_readable(self._stdout)

    async def wait(self) -> int:
        """Wait for the child to exit and reap it; return its status."""
        if self._popen.poll() is not None:
            return self._popen.returncode
        try:
            pidfd = os.pidfd_open(self.pid)
        except (AttributeError, OSError):  # no pidfd here (old kernel, some sandboxes): poll
            while self._popen.poll() is None:  # noqa: ASYNC110 - an exit is no event here
                await anyio.sleep(_POLL_S)
            return self._popen.returncode
        try:
            await anyio.wait_readable(pidfd)
        finally:
            anyio.notify_closing(pidfd)
            os.close(pidfd)
        return self._popen.wait()

    def close_pipes(self) -> None:
        """Close this side of the pipes (a reader waiting on one is woken with an error)."""
        for name in ("_stdin", "_stdout"):
            fd = getattr(self, name)
            if fd is not None:
                setattr(self, name, None)
                anyio.notify_closing(fd)
                os.close(fd)


def _take_fd(pipe: IO[bytes] | None) -> int | None:
    """Own the pipe's descriptor directly, non-blocking (the loop waits on it, not a thread)."""
    if pipe is None:
        return None
    fd = os.dup(pipe.fileno())
    pipe.close()
    os.set_blocking(fd, False)
    return fd


async def spawn(
    argv: Sequence[str],
    *,
    pipes: bool = True,
    stderr: IO[bytes] | int | None = subprocess.DEVNULL,
    env: Mapping[str, str] | None = None,
    start_new_session: bool = False,
) -> SpawnedProcess:
    """Start `argv` (vfork and exec), with its stdin and stdout piped here when `pipes`.

    :raises OSError: the program could not be started.
    """
    await anyio.lowlevel.checkpoint()
    popen = subprocess.Popen(  # noqa: ASYNC220 - vfork: about a millisecond, see the module doc
        list(argv),
        stdin=subprocess.PIPE if pipes else subprocess.DEVNULL,
        stdout=subprocess.PIPE if pipes else subprocess.DEVNULL,
        stderr=stderr,
        env=dict(env) if env is not None else None,
        start_new_session=start_new_session,
    )
    return SpawnedProcess(popen)


async def run(argv: Sequence[str], *, timeout: float) -> subprocess.CompletedProcess[bytes]:
    """Run a short command to its end in a worker thread, its output captured.

    :raises OSError: the program could not be started.
    :raises subprocess.TimeoutExpired: it ran past `timeout` seconds (it is killed first).
    """
    return await anyio.to_thread.run_sync(
        lambda: subprocess.run(list(argv), capture_output=True, timeout=timeout, check=False)
    )
