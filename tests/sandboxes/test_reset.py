"""Reset before reuse on the real backends: a reused sandbox is as good as a fresh one, and one
that is not is destroyed, never handed out."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from sandboxes import SandboxSpec, create_sandbox
from sandboxes._helper_sandbox import HelperSandbox
from sandboxes._output import CappedBuffer
from sandboxes._protocol import Sandbox
from sandboxes._spec import MiB
from sandboxes.pool import SandboxPool

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(120)]

# What a task could observe about its sandbox: processes, files, free space, identity, modes.
LOOK_AROUND = """
import os
procs = []
for p in os.listdir("/proc"):
    if p.isdigit() and int(p) != os.getpid():
        try:
            procs.append(open(f"/proc/{p}/cmdline", "rb").read().split(b"\\0")[0].decode())
        except OSError:
            pass
roots = ("/work", "/tmp", "/dev/shm")
files = sorted(os.path.join(d, n) for r in roots for d, ds, fs in os.walk(r) for n in ds + fs)
print(sorted(procs), files, [os.statvfs(r).f_bavail for r in roots])
print(os.getuid(), [oct(os.stat(r).st_mode) for r in roots], sorted(os.environ.items()))
"""
PROCESSES = "cat /proc/[0-9]*/cmdline | tr '\\0' ' '"
MAKE_A_MESS = (
    "echo changed > answer.txt; mkdir -p locked/deep; echo x > locked/deep/f; chmod 000 locked; "
    "echo tmp > /tmp/leftover; echo shm > /dev/shm/leftover; "
    "head -c 100000000 /dev/zero > fill 2>/dev/null; "
    "nohup sleep 600.75 >/dev/null 2>&1 & setsid sleep 600.75 >/dev/null 2>&1 & chmod 000 ."
)


def small_disk(backend: str) -> SandboxSpec:
    return SandboxSpec(backend=backend, disk=8 * MiB)  # type: ignore[arg-type]


def factory_for(spec: SandboxSpec, made: list[Sandbox]) -> Callable[[str], Sandbox]:
    def make(key: str) -> Sandbox:
        sandbox = create_sandbox(spec)
        made.append(sandbox)
        return sandbox

    return make


async def test_a_reused_sandbox_is_indistinguishable_from_a_fresh_one(backend: str) -> None:
    made: list[Sandbox] = []
    async with SandboxPool(factory_for(small_disk(backend), made), capacity=1) as pool:
        async with pool.lease("k") as fresh:
            before = await fresh.exec(["python3", "-c", LOOK_AROUND])
            mess = await fresh.exec(["sh", "-c", MAKE_A_MESS])
        await pool.settle()
        async with pool.lease("k") as reused:
            after = await reused.exec(["python3", "-c", LOOK_AROUND])
        stats = pool.statistics()
    assert reused.id == fresh.id
    assert mess.exit_code == 0
    assert before.exit_code == 0
    assert b"python3" in before.stdout  # the look-around saw the sandbox's own processes
    assert after.stdout == before.stdout
    assert stats.validation_failures == 0


# Try to create a file in each directory; print those where it worked.
WRITABLE = """
import os
found = []
for d in ("/", "/etc", "/dev", "/usr", "/var/tmp", "/run", "/home", "/root", "/opt", "/srv",
          "/work", "/tmp", "/dev/shm"):
    try:
        with open(os.path.join(d, "roost-probe"), "w") as f:
            f.write("x")
        found.append(d)
    except OSError:
        pass
print(" ".join(found))
"""


async def test_only_the_reset_directories_are_writable(spec: SandboxSpec) -> None:
    # The root filesystem is read-only on every backend: what a reset empties is all there is.
    async with create_sandbox(spec) as sb:
        assert isinstance(sb, HelperSandbox)
        writable = await sb.exec(["python3", "-c", WRITABLE])
        reset_dirs = sb._writable_dirs()
    assert writable.exit_code == 0, writable
    assert writable.stdout.decode().split() == reset_dirs == ["/work", "/tmp", "/dev/shm"]


async def test_validation_catches_what_a_broken_reset_left_behind(backend: str) -> None:
    made: list[Sandbox] = []

    async def skip_reset() -> None:
        pass  # a reset that silently does nothing: only validation stands in the way

    async with SandboxPool(factory_for(small_disk(backend), made), capacity=1) as pool:
        async with pool.lease("k") as dirty:
            assert isinstance(dirty, HelperSandbox)
            dirty._reset = skip_reset  # type: ignore[method-assign]
            await dirty.exec(["sh", "-c", "echo changed > answer.txt; echo t > /tmp/t"])
            await dirty.exec(["sh", "-c", "head -c 2000000 /dev/zero > fill"])
            await _leak_a_process(dirty)
            problems = await dirty.validate()
        await pool.settle()
        async with pool.lease("k") as replacement:
            clean = await replacement.exec(["sh", "-c", f"echo /work/* /tmp/*; {PROCESSES}"])
        stats = pool.statistics()
    assert any("stray process" in p and "600.5" in p for p in problems), problems
    assert any("answer.txt" in p for p in problems), problems
    assert any(p.startswith("disk:") for p in problems), problems
    assert replacement.id != dirty.id
    assert stats.validation_failures == 1
    assert clean.stdout.startswith(b"/work/* /tmp/*\n")  # both globs matched nothing
    assert b"600.5" not in clean.stdout


async def _leak_a_process(sandbox: HelperSandbox) -> None:
    """Start a process that outlives its exec: only possible by asking the helper not to kill
    leftovers, which stands for any way a process might survive a reset."""
    helper = await sandbox._helper_ready()
    reply = await helper.run(
        ["sh", "-c", "sleep 600.5 >/dev/null 2>&1 </dev/null &"],
        stdin=None,
        env={"PATH": "/usr/bin:/bin"},
        cwd=sandbox.spec.workdir,
        timeout=10,
        out=CappedBuffer(1024),
        err=CappedBuffer(1024),
        sweep=False,
    )
    assert reply.status == 0


async def test_every_sandbox_of_a_key_starts_from_the_prepared_snapshot(backend: str) -> None:
    prepared: list[str] = []

    async def place_task(sandbox: Sandbox) -> None:
        prepared.append(sandbox.id)
        await sandbox.put_file("task/solution.py", b"def f(x):\n    return x + 1\n")
        result = await sandbox.exec(["sh", "-c", "mkdir -p deps/lib && echo v1 > deps/lib/V"])
        assert result.exit_code == 0

    made: list[Sandbox] = []
    async with SandboxPool(
        factory_for(SandboxSpec(backend=backend), made),  # type: ignore[arg-type]
        capacity=2,
        prepare={"k": place_task},
    ) as pool:
        async with pool.lease("k") as first, pool.lease("k") as second:
            listing = [
                (await sb.exec(["sh", "-c", "find . | sort; cat deps/lib/V"])).stdout
                for sb in (first, second)
            ]
            await first.exec(["sh", "-c", "rm -rf deps; echo junk > task/solution.py"])
        await pool.settle()
        async with pool.lease("k") as again:
            restored = await again.exec(["sh", "-c", "find . | sort; cat deps/lib/V"])
        stats = pool.statistics()
    assert len(prepared) == 1
    assert listing[0] == listing[1]
    assert b"./task/solution.py" in listing[0]
    assert restored.stdout == listing[0]
    assert stats.validation_failures == 0
