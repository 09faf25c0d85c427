"""The exec helper: one small process inside each warm sandbox that starts commands on request.

This file runs *inside* the sandbox (`python3 -I -S -c <this source>`, standard library only),
speaking a framed protocol on stdin/stdout with the host side (`sandboxes._helper`). A command
then costs a fork and an exec instead of a bubblewrap namespace or a `docker exec`.

Frames are `kind (1 byte) | length (4 bytes, big endian) | payload`. Requests:

    R  run: u32 header length, JSON header {argv, env, cwd, timeout, limit, stdin, sweep}, stdin
    P  ping                         -> P
    Z  reset: JSON {dirs}           -> Z JSON {errors}   (kill all, empty dirs, restore baseline)
    V  inspect: JSON {dirs}         -> V JSON {procs, files, free}
    T  snapshot: JSON {dir}         -> T tar bytes of dir
    L  load baseline: u32 header length, JSON {dirs}, tar bytes
                                    -> L JSON {errors}   (then a reset to it, as Z)

Answers to R: S as the command is about to start, any number of O (stdout) and E (stderr)
chunks, then X JSON {status, timed_out, clean}. S tells the host that a command was running if
the helper dies before X: then the command is the suspect.

The contract is the backends' own: nothing outlives its exec (every process but PID 1 and the
helper is killed when the command ends or times out; a /proc scan, not kill(-1), which gVisor
turns on PID 1 too), output beyond `limit` is counted, not sent, and a timeout kills the whole
tree.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import os
import select
import signal
import stat
import struct
import sys
import time
from typing import Any

HEADER = struct.Struct(">cI")
U32 = struct.Struct(">I")
SWEEP_DEADLINE_S = 5.0
DRAIN_DEADLINE_S = 2.0
HASH_LIMIT = 1 << 20
_reaped: dict[int, int] = {}
_baseline: bytes = b""
_root_modes: dict[str, int] = {}


def write_all(data: bytes) -> None:
    # gVisor's exec pipes accept short writes: keep writing until everything is out.
    view = memoryview(data)
    while view:
        try:
            view = view[os.write(1, view) :]
        except BlockingIOError:
            select.select([], [1], [])


def send(kind: bytes, payload: bytes = b"") -> None:
    write_all(HEADER.pack(kind, len(payload)) + payload)


def send_json(kind: bytes, doc: Any) -> None:
    send(kind, json.dumps(doc).encode())


def read_exact(n: int) -> bytes:
    chunks = []
    while n:
        try:
            chunk = os.read(0, min(n, 1 << 20))
        except BlockingIOError:
            select.select([0], [], [])
            continue
        if not chunk:
            sys.exit(0)  # the host went away: so do we
        chunks.append(chunk)
        n -= len(chunk)
    return b"".join(chunks)


def others() -> list[int]:
    """Live processes in this pid namespace other than PID 1 and the helper (zombies skipped)."""
    me = os.getpid()
    pids = []
    for name in os.listdir("/proc"):
        if not name.isdigit() or name == "1" or int(name) == me:
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as f:
                state = f.read().rpartition(b")")[2].split()[0]
        except (OSError, IndexError):
            continue
        if state != b"Z":
            pids.append(int(name))
    return pids


def reap() -> None:
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        _reaped[pid] = status


def sweep() -> bool:
    """Kill every other process until a /proc scan finds none; False if that took too long."""
    deadline = time.monotonic() + SWEEP_DEADLINE_S
    while True:
        pids = others()
        if not pids:
            reap()
            return True
        for pid in pids:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
        reap()
        if time.monotonic() > deadline:
            return False


def resolve(name: str, path: str) -> str:
    """The file `name` runs, found on the command's own PATH (not the helper's)."""
    if "/" in name:
        return name
    for directory in path.split(":"):
        candidate = os.path.join(directory or ".", name)
        if os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            return candidate
    raise FileNotFoundError(name)


def spawn(req: dict[str, Any], fds: tuple[int, int, int]) -> int:
    """Start the command (posix_spawn: a vfork and an exec, cheaper than fork from Python).

    :raises OSError: it could not start (the caller reports 126/127 as a shell would).
    """
    argv = req["argv"]
    program = resolve(argv[0], req["env"].get("PATH", ""))
    os.chdir(req["cwd"])
    return os.posix_spawn(
        program,
        argv,
        req["env"],
        file_actions=[(os.POSIX_SPAWN_DUP2, fd, target) for target, fd in enumerate(fds)],
        setsigdef=(signal.SIGPIPE, signal.SIGXFSZ, signal.SIGCHLD),
    )


def run(body: bytes, wake: int) -> None:
    (hlen,) = U32.unpack_from(body)
    req = json.loads(body[4 : 4 + hlen])
    data = memoryview(body)[4 + hlen :]
    out_r, out_w = os.pipe()
    err_r, err_w = os.pipe()
    if req["stdin"]:
        in_r, in_w = os.pipe()
    else:
        in_r, in_w = os.open("/dev/null", os.O_RDONLY), -1
    # Before the spawn: once it returns, the command may already have killed us.
    send(b"S")
    try:
        pid = spawn(req, (in_r, out_w, err_w))
    except (OSError, ValueError) as exc:  # ValueError: text the OS cannot take (a surrogate)
        for fd in (in_r, in_w, out_w, err_w, out_r, err_r):
            if fd >= 0:
                os.close(fd)
        name = req["argv"][0]
        if isinstance(exc, FileNotFoundError) and exc.filename in (None, name):
            send(b"E", f"roost: {name}: command not found\n".encode(errors="replace"))
            send_json(b"X", {"status": 127, "timed_out": False, "clean": True})
        else:
            send(b"E", f"roost: cannot run {name}: {exc}\n".encode(errors="replace"))
            send_json(b"X", {"status": 126, "timed_out": False, "clean": True})
        return
    for fd in (in_r, out_w, err_w):
        os.close(fd)
    limit = req["limit"] + 1  # one byte more than kept tells the host it was truncated
    streams = {out_r: [b"O", 0], err_r: [b"E", 0]}
    poller = select.poll()
    for fd in streams:
        poller.register(fd, select.POLLIN)
    poller.register(wake, select.POLLIN)
    if in_w >= 0:
        os.set_blocking(in_w, False)
        poller.register(in_w, select.POLLOUT)
    deadline = time.monotonic() + req["timeout"]
    timed_out = False
    while pid not in _reaped:
        left = deadline - time.monotonic()
        if left <= 0:
            timed_out = True
            break
        for fd, _ in poller.poll(left * 1000):
            if fd == wake:
                os.read(wake, 4096)
                reap()
            elif fd == in_w:
                try:
                    n = os.write(in_w, data[:65536])
                except BlockingIOError:
                    continue
                except OSError:
                    n, data = 0, data[:0]
                data = data[n:]
                if not data:
                    poller.unregister(in_w)
                    os.close(in_w)
                    in_w = -1
            else:
                forward(fd, streams, poller, limit)
        reap()
    # `sweep` false only simulates a leak for the pool's tests: validation must catch it.
    clean = sweep() if req.get("sweep", True) else True
    if in_w >= 0:
        os.close(in_w)
    drain_deadline = time.monotonic() + DRAIN_DEADLINE_S
    while any(fd in streams for fd in (out_r, err_r)) and time.monotonic() < drain_deadline:
        for fd, _ in poller.poll(100):
            if fd == wake:
                os.read(wake, 4096)
            elif fd in streams:
                forward(fd, streams, poller, limit)
    for fd in list(streams):
        os.close(fd)
        clean = False  # something still held the pipe open after the sweep
    poller.unregister(wake)
    status = _reaped.pop(pid, None)
    code = None if status is None else os.waitstatus_to_exitcode(status)
    if code is not None and code < 0:
        code = 128 - code
    send_json(b"X", {"status": code, "timed_out": timed_out, "clean": clean})


def forward(fd: int, streams: dict[int, list[Any]], poller: Any, limit: int) -> None:
    chunk = os.read(fd, 65536)
    if not chunk:
        poller.unregister(fd)
        os.close(fd)
        del streams[fd]
        return
    kind, sent = streams[fd]
    if sent < limit:
        piece = chunk[: limit - sent]
        streams[fd][1] = sent + len(piece)
        send(kind, piece)


def empty_dir(path: str, errors: list[str]) -> None:
    """Delete everything under `path`, making directories writable first (a program may have
    taken away its own permissions on them); symlinks are removed, never followed."""
    try:
        entries = list(os.scandir(path))
    except OSError as exc:
        errors.append(f"{path}: {exc.strerror}")
        return
    for entry in entries:
        try:
            if entry.is_dir(follow_symlinks=False):
                os.chmod(entry.path, 0o700)
                empty_dir(entry.path, errors)
                os.rmdir(entry.path)
            else:
                os.unlink(entry.path)
        except OSError as exc:
            errors.append(f"{entry.path}: {exc.strerror}")


def extract(tar_bytes: bytes, dest: str, errors: list[str]) -> None:
    if not tar_bytes:
        return
    import tarfile

    try:
        with tarfile.open(fileobj=io.BytesIO(tar_bytes)) as tar:
            tar.extractall(dest)  # made by snapshot() in a sandbox like this one
    except (OSError, tarfile.TarError) as exc:
        errors.append(f"restore into {dest}: {exc}")


def root_mode(path: str) -> int:
    """The mode `path` itself had when first asked about (the pristine one): a program may take
    away its own permissions on the work directory (`chmod 000 .`); reset gives them back."""
    if path not in _root_modes:
        try:
            _root_modes[path] = stat.S_IMODE(os.stat(path).st_mode)
        except OSError:
            _root_modes[path] = -1
    return _root_modes[path]


def reset(doc: dict[str, Any], kind: bytes = b"Z") -> None:
    errors: list[str] = []
    if not sweep():
        errors.append("processes survived the kill loop")
    for path in doc["dirs"]:
        mode = root_mode(path)
        with contextlib.suppress(OSError):  # not the owner (/tmp): nothing to give back
            os.chmod(path, mode if mode >= 0 else 0o700)
        empty_dir(path, errors)
    extract(_baseline, doc["dirs"][0], errors)
    send_json(kind, {"errors": errors})


def manifest(root: str) -> list[list[Any]]:
    """(path, kind, mode, size, digest) of everything under `root`, sorted."""
    found: list[list[Any]] = []
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            path = os.path.join(dirpath, name)
            try:
                st = os.lstat(path)
            except OSError:
                continue
            rel = os.path.relpath(path, root)
            digest = ""
            if stat.S_ISREG(st.st_mode) and st.st_size <= HASH_LIMIT:
                try:
                    with open(path, "rb") as f:
                        digest = hashlib.sha256(f.read()).hexdigest()
                except OSError:
                    digest = "unreadable"
            elif stat.S_ISLNK(st.st_mode):
                digest = os.readlink(path)
            kind = stat.S_IFMT(st.st_mode)
            found.append([rel, kind, stat.S_IMODE(st.st_mode), st.st_size, digest])
    return sorted(found)


def inspect(doc: dict[str, Any]) -> None:
    procs = []
    for pid in others():
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                procs.append(f.read().replace(b"\0", b" ").decode(errors="replace").strip())
        except OSError:
            procs.append(f"pid {pid}")
    free = {}
    for path in doc["dirs"]:
        try:
            st = os.statvfs(path)
            free[path] = st.f_bavail * st.f_frsize
        except OSError:
            free[path] = -1
    files = {path: manifest(path) for path in doc["dirs"]}
    modes = {}
    for path in doc["dirs"]:
        root_mode(path)
        try:
            modes[path] = stat.S_IMODE(os.stat(path).st_mode)
        except OSError:
            modes[path] = -1
    send_json(b"V", {"procs": procs, "files": files, "free": free, "modes": modes})


def snapshot(doc: dict[str, Any]) -> None:
    import tarfile

    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for name in sorted(os.listdir(doc["dir"])):
            tar.add(os.path.join(doc["dir"], name), arcname=name)
    send(b"T", buf.getvalue())


def load(body: bytes) -> None:
    global _baseline
    (hlen,) = U32.unpack_from(body)
    doc = json.loads(body[4 : 4 + hlen])
    _baseline = body[4 + hlen :]
    reset(doc, b"L")


def not_dumpable() -> None:
    """Commands run as the helper's own user: without this they could ptrace their parent (or
    write its /proc/PID/mem) and forge its answers. A process that is not dumpable can only be
    traced with CAP_SYS_PTRACE, which no sandbox has; exec makes each command dumpable again."""
    import ctypes

    pr_set_dumpable = 4
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(pr_set_dumpable, 0, 0, 0, 0)


def main() -> None:
    not_dumpable()
    # SIGCHLD wakes the poll loop through a pipe; no busy waiting.
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_r, False)
    os.set_blocking(wake_w, False)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    signal.set_wakeup_fd(wake_w)
    send_json(b"H", {"pid": os.getpid()})
    while True:
        kind, length = HEADER.unpack(read_exact(HEADER.size))
        body = read_exact(length)
        if kind == b"R":
            run(body, wake_r)
        elif kind == b"P":
            send(b"P")
        elif kind == b"Z":
            reset(json.loads(body))
        elif kind == b"V":
            inspect(json.loads(body))
        elif kind == b"T":
            snapshot(json.loads(body))
        elif kind == b"L":
            load(body)
        else:
            sys.exit(f"roost helper: unknown request {kind!r}")


if __name__ == "__main__":
    main()
