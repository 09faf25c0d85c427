"""The exec helper: commands in a warm sandbox are a fork and an exec of one long-lived helper,
and losing the helper (killed, cancelled mid-exec) costs a new helper, never a leak."""

from __future__ import annotations

import anyio
import pytest

from sandboxes import SandboxSpec, create_sandbox
from sandboxes._helper_sandbox import HelperSandbox

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(90)]

PROCESSES = "cat /proc/[0-9]*/cmdline | tr '\\0' ' '"


async def test_every_command_is_started_by_the_same_helper(spec: SandboxSpec) -> None:
    async with create_sandbox(spec) as sb:
        parents = {(await sb.exec(["sh", "-c", "echo $PPID"])).stdout for _ in range(5)}
        pid_ns = {(await sb.exec(["readlink", "/proc/self/ns/pid"])).stdout for _ in range(3)}
    assert len(parents) == 1
    if spec.backend != "gvisor":  # gVisor names namespaces afresh on every readlink
        assert len(pid_ns) == 1


async def test_a_killed_helper_is_an_infra_error_then_replaced(spec: SandboxSpec) -> None:
    async with create_sandbox(spec) as sb:
        killed = await sb.exec(["sh", "-c", "kill -9 $PPID; sleep 5"])
        after = await sb.exec(["sh", "-c", "echo alive; echo $PPID"])
        again = await sb.exec(["sh", "-c", "echo $PPID"])
    assert killed.infra_error is not None
    assert after.stdout.startswith(b"alive\n")
    assert after.stdout.split()[1] == again.stdout.strip()  # the new helper stays


async def test_a_cancelled_exec_leaves_nothing_running(spec: SandboxSpec) -> None:
    async with create_sandbox(spec) as sb:
        with anyio.move_on_after(1.0) as scope:
            await sb.exec(["sh", "-c", "sleep 600.25 & sleep 600.25"], timeout=60)
        left = await sb.exec(["sh", "-c", PROCESSES])
    assert scope.cancelled_caught
    assert left.exit_code == 0
    assert b"600.25" not in left.stdout


async def test_timeouts_and_output_limits_hold_through_the_helper(spec: SandboxSpec) -> None:
    small = SandboxSpec(backend=spec.backend, output_limit=1000)
    async with create_sandbox(small) as sb:
        timed_out = await sb.exec(["sh", "-c", "yes"], timeout=1)
        capped = await sb.exec(["head", "-c", "5000", "/dev/zero"])
        missing = await sb.exec(["no-such-program"])
        bad_cwd = await sb.exec(["true"], cwd="nowhere")
    assert (timed_out.timed_out, timed_out.stdout_truncated) == (True, True)
    assert len(timed_out.stdout) == 1000
    assert (capped.stdout, capped.stdout_truncated) == (b"\0" * 1000, True)
    assert missing.exit_code == 127
    assert bad_cwd.exit_code == 126
    assert isinstance(sb, HelperSandbox)


TRACE_PARENT = """
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
helper = int(os.environ["HELPER"])
attached = libc.ptrace(16, helper, 0, 0)  # PTRACE_ATTACH
try:
    open(f"/proc/{helper}/mem", "rb").close()
    mem = "open"
except OSError as exc:
    mem = exc.strerror
print(attached, ctypes.get_errno(), mem)
"""


async def test_commands_can_neither_trace_nor_read_their_helper(spec: SandboxSpec) -> None:
    async with create_sandbox(spec) as sb:
        result = await sb.exec(["sh", "-c", 'HELPER=$PPID exec python3 -c "$0"', TRACE_PARENT])
        after = await sb.exec(["echo", "still answering"])
    attached, errno, mem = result.stdout.decode().split(maxsplit=2)
    assert (attached, errno) == ("-1", "1")  # EPERM: the helper is not dumpable
    assert mem.strip() == "Permission denied"
    assert after.stdout == b"still answering\n"
