"""The isolation suite: the same checks back `roost sandbox check` and tests/sandboxes.

Each check starts a fresh sandbox from the given spec, attacks it, and returns a `CheckOutcome`:
`pass`, `fail`, or `weaker` where the backend is weaker *by design* (the process backend without
root: no memory cgroup, no size-limited work directory). A weaker result says what held instead.
"""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import tempfile
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import anyio

from sandboxes._errors import UnsafePathError
from sandboxes._protocol import Sandbox
from sandboxes._spec import MiB, SandboxSpec
from sandboxes.factory import create_sandbox

Status = Literal["pass", "fail", "weaker"]


@dataclass(frozen=True)
class CheckOutcome:
    name: str
    status: Status
    detail: str
    seconds: float = 0.0


Check = Callable[[Sandbox], Awaitable[tuple[Status, str]]]
CHECKS: dict[str, Check] = {}


def _check(name: str) -> Callable[[Check], Check]:
    def register(fn: Check) -> Check:
        CHECKS[name] = fn
        return fn

    return register


async def _py(sb: Sandbox, code: str, *, timeout: float = 20.0) -> dict[str, Any]:
    """Run a Python snippet that prints one JSON object; its fields, plus the result's."""
    r = await sb.exec(["python3", "-c", code], timeout=timeout)
    r.raise_for_infra()
    try:
        data: dict[str, Any] = json.loads(r.stdout or b"{}")
    except ValueError:
        data = {"raw": r.stdout.decode(errors="replace")}
    data["_exit"] = r.exit_code
    data["_stderr"] = r.stderr.decode(errors="replace")[-300:]
    return data


def _host_pids_with(marker: str) -> list[int]:
    """Host processes whose command line contains `marker` (processes are host-visible under
    bubblewrap and runc; gVisor's are not, which the in-sandbox scan covers)."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                cmdline = Path(f"/proc/{entry}/cmdline").read_bytes()
            except OSError:
                continue
            if marker.encode() in cmdline:
                found.append(int(entry))
    return found


HOST_PROBE_TIMEOUT_S = 10.0


async def _host_runs_true() -> subprocess.CompletedProcess[bytes] | None:
    """`true` run on the host, or None when the host could not run it in time (an attack that
    starved the host is then a failed check, not a hung one)."""
    with anyio.move_on_after(HOST_PROBE_TIMEOUT_S):
        return await anyio.run_process(["true"], check=False)
    return None


def _existing(paths: list[str]) -> list[str]:
    return [p for p in paths if Path(p).exists()]


_SCAN_PROC = """
import json, os
found = []
for p in os.listdir('/proc'):
    if p.isdigit():
        try:
            c = open(f'/proc/{p}/cmdline', 'rb').read().replace(b'\\0', b' ').decode()
        except OSError:
            continue
        found.append(c)
print(json.dumps({'cmdlines': found}))
"""


@_check("fork bomb contained by pids limit")
async def fork_bomb(sb: Sandbox) -> tuple[Status, str]:
    r = await sb.exec(["sh", "-c", "f() { f & f; }; f"], timeout=2)
    r.raise_for_infra()
    after = await sb.exec(["echo", "alive"])
    host = await _host_runs_true()
    limited = b"Cannot fork" in r.stderr or b"fork" in r.stderr.lower()
    if after.stdout == b"alive\n" and host is not None and host.returncode == 0 and limited:
        return "pass", f"forks refused at {sb.spec.pids} pids; sandbox and host still answer"
    return "fail", f"limit hit={limited}, after={after!r}"


@_check("memory bomb is oom_killed, host unharmed")
async def memory_bomb(sb: Sandbox) -> tuple[Status, str]:
    size = sb.spec.memory * 4
    r = await sb.exec(["python3", "-c", f"b = b'x' * {size}; print(len(b))"], timeout=30)
    r.raise_for_infra()
    host = await _host_runs_true()
    if r.oom_killed and host is not None and host.returncode == 0:
        whole = " (gVisor: the whole sandbox, now broken)" if getattr(sb, "broken", None) else ""
        return "pass", f"killed by the kernel at the {sb.spec.memory // MiB} MiB limit{whole}"
    if b"MemoryError" in r.stderr and not getattr(sb, "memory_by_cgroup", True):
        return "weaker", "no memory cgroup (not root): RLIMIT_AS refused the allocation instead"
    return "fail", f"exit={r.exit_code} oom={r.oom_killed} stderr={r.stderr[-200:]!r}"


@_check("disk fill stops at the limit")
async def disk_fill(sb: Sandbox) -> tuple[Status, str]:
    limit = sb.spec.disk
    code = f"""
import json
n = 0
err = None
try:
    with open('fill', 'wb') as f:
        while n < {2 * limit}:
            f.write(b'\\0' * 1048576)
            f.flush()
            n += 1048576
except OSError as e:
    err = e.strerror
print(json.dumps({{'written': n, 'error': err}}))
"""
    d = await _py(sb, code, timeout=60)
    if d.get("error") and d["written"] <= limit:
        if "space" in str(d["error"]).lower():
            return "pass", f"ENOSPC after {d['written'] // MiB} MiB (limit {limit // MiB} MiB)"
        return "weaker", f"{d['error']}: each file is capped (RLIMIT_FSIZE), not the total"
    return "fail", f"wrote {d.get('written')} bytes, error={d.get('error')}"


@_check("no network (host loopback, DNS)")
async def no_network(sb: Sandbox) -> tuple[Status, str]:
    accepted = 0

    async def count(stream: Any) -> None:
        nonlocal accepted
        accepted += 1
        await stream.aclose()

    listener = await anyio.create_tcp_listener(local_host="127.0.0.1")
    port = listener.extra(anyio.abc.SocketAttribute.local_port)
    async with listener, anyio.create_task_group() as tg:
        tg.start_soon(listener.serve, count)
        code = f"""
import json, socket
out = {{}}
try:
    socket.create_connection(('127.0.0.1', {port}), timeout=2).close(); out['tcp'] = 'connected'
except OSError as e:
    out['tcp'] = 'refused: ' + str(e)
try:
    socket.getaddrinfo('deb.debian.org', 80); out['dns'] = 'resolved'
except OSError as e:
    out['dns'] = 'failed: ' + str(e)
print(json.dumps(out))
"""
        d = await _py(sb, code)
        tg.cancel_scope.cancel()
    if accepted == 0 and d.get("tcp", "").startswith("refused") and d.get("dns") != "resolved":
        return "pass", f"tcp {d['tcp']}; dns {d['dns']}"
    return "fail", f"accepted={accepted} {d}"


@_check("host processes invisible")
async def host_processes(sb: Sandbox) -> tuple[Status, str]:
    marker = f"{600 + secrets.randbelow(10_000)}.{secrets.randbelow(10**6)}"
    proc = await anyio.open_process(["sleep", marker])
    try:
        d = await _py(sb, _SCAN_PROC)
    finally:
        proc.kill()
        with anyio.move_on_after(HOST_PROBE_TIMEOUT_S):  # reaping a killed `sleep`
            await proc.aclose()
    seen = [c for c in d.get("cmdlines", []) if marker in c]
    count = len(d.get("cmdlines", []))
    if not seen and count <= 10 and d["_exit"] == 0:
        return "pass", f"{count} processes visible inside, none of the host's"
    return "fail", f"host marker seen={bool(seen)}, visible={count}"


@_check("host secret file unreadable")
async def secret_file(sb: Sandbox) -> tuple[Status, str]:
    secret = secrets.token_hex(16)
    with tempfile.TemporaryDirectory(prefix="roost-secret-") as tmp:
        path = Path(tmp) / "secret.txt"
        path.write_text(secret)
        os.chmod(tmp, 0o755)
        path.chmod(0o644)  # readable by anyone on the host: only isolation protects it
        r = await sb.exec(["sh", "-c", f"cat {path} /proc/1/root{path} 2>&1"])
    r.raise_for_infra()
    if secret.encode() not in r.stdout:
        return "pass", "a world-readable host file is not visible inside"
    return "fail", "the secret was read"


@_check("nothing written outside the sandbox")
async def writes_outside(sb: Sandbox) -> tuple[Status, str]:
    name = f"roost-escape-{secrets.token_hex(4)}"
    with tempfile.TemporaryDirectory(prefix="roost-outside-") as tmp:
        os.chmod(tmp, 0o777)  # writable by anyone on the host: only isolation protects it
        targets = [f"{tmp}/{name}", f"/usr/{name}", f"/etc/{name}", f"/{name}", f"/var/tmp/{name}"]
        await sb.exec(["sh", "-c", " ; ".join(f"echo x > {t}" for t in targets) + " ; true"])
        leaked = _existing(targets)
    if not leaked:
        return "pass", "writes to host paths, /usr, /etc and / did not reach the host"
    return "fail", f"written on the host: {leaked}"


@_check("not root inside")
async def not_root(sb: Sandbox) -> tuple[Status, str]:
    r = await sb.exec(["id", "-u"])
    r.raise_for_infra()
    uid = r.stdout.strip().decode()
    if uid and uid != "0":
        return "pass", f"uid {uid} inside"
    return "fail", f"uid {uid!r} inside"


@_check("timeouts leave no process alive")
async def timeout_tree(sb: Sandbox) -> tuple[Status, str]:
    marks = [f"{700 + secrets.randbelow(10_000)}.{i}{secrets.randbelow(10**5)}" for i in range(4)]
    script = (
        f"setsid sleep {marks[0]} & "
        f"sh -c 'trap \"\" TERM HUP INT; sleep {marks[1]}; true' & "
        f"nohup sleep {marks[2]} >/dev/null 2>&1 & "
        f"trap '' TERM; sleep {marks[3]}"
    )
    r = await sb.exec(["sh", "-c", script], timeout=1)
    r.raise_for_infra()
    host_left = [p for m in marks for p in _host_pids_with(m)]
    d = await _py(sb, _SCAN_PROC)
    inside_left = [c for c in d.get("cmdlines", []) if any(m in c for m in marks)]
    if r.timed_out and not host_left and not inside_left:
        return "pass", "setsid, nohup and TERM-ignoring children all gone after the timeout"
    return "fail", f"timed_out={r.timed_out} host={host_left} inside={inside_left}"


@_check("large output neither deadlocks nor is mangled")
async def large_output(sb: Sandbox) -> tuple[Status, str]:
    limit = sb.spec.output_limit
    code = f"""
import sys
pattern = bytes(range(256)) * 256
n = 0
while n < {limit}:
    chunk = pattern[: {limit} - n]
    sys.stdout.buffer.write(chunk); sys.stdout.buffer.flush()
    sys.stderr.buffer.write(chunk); sys.stderr.buffer.flush()
    n += len(chunk)
"""
    expected = (bytes(range(256)) * (limit // 256 + 1))[:limit]
    r = await sb.exec(["python3", "-c", code], timeout=30)
    r.raise_for_infra()
    over = await sb.exec(["head", "-c", str(limit + MiB), "/dev/zero"], timeout=30)
    exact = r.stdout == expected and r.stderr == expected and not r.stdout_truncated
    capped = over.stdout_truncated and over.stdout == b"\0" * limit
    if exact and capped:
        return "pass", f"{limit // 1024} KiB on both pipes byte-exact; larger output capped"
    return "fail", f"exact={exact} capped={capped} exit={r.exit_code}"


@_check("upload rejects .., absolute paths, escaping symlinks")
async def upload_paths(sb: Sandbox) -> tuple[Status, str]:
    setup = "ln -s / up && ln -s /etc/passwd pw && mkdir d && ln -s ../.. d/out"
    (await sb.exec(["sh", "-c", setup])).raise_for_infra()
    refused = []
    for path in ("../x", "/etc/x", "up/tmp/x", "pw", "d/out/x", "a/../../x"):
        try:
            await sb.put_file(path, b"x")
        except UnsafePathError:
            refused.append(path)
    try:
        await sb.get_file("pw")
    except UnsafePathError:
        refused.append("get:pw")
    await sb.put_file("ok/data.bin", bytes(range(256)))
    round_trip = await sb.get_file("ok/data.bin") == bytes(range(256))
    if len(refused) == 7 and round_trip:
        return "pass", "7 escapes refused; a normal file round-trips byte-exact"
    return "fail", f"refused only {refused}; round trip ok={round_trip}"


async def run_check(name: str, spec: SandboxSpec, **options: Any) -> CheckOutcome:
    """Run one check on a fresh sandbox. An exception is a failed check, never a crash."""
    started = time.monotonic()
    try:
        async with create_sandbox(spec, **options) as sb:
            status, detail = await CHECKS[name](sb)
    except Exception as exc:  # a check that raised has failed; cancellation still propagates
        status, detail = "fail", f"{type(exc).__name__}: {exc}"
    return CheckOutcome(name, status, detail, time.monotonic() - started)


async def run_isolation_suite(spec: SandboxSpec, **options: Any) -> list[CheckOutcome]:
    """Every check, one after the other (they measure limits; running them together would blur
    which one a shortage came from)."""
    return [await run_check(name, spec, **options) for name in CHECKS]
