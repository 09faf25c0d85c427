"""The exec helper: commands in a warm sandbox are a fork and an exec of one long-lived helper,
and losing the helper (killed, cancelled mid-exec) costs a new helper, never a leak. A helper
killed by the command it runs is that command's failure (and taints the sandbox); a helper lost
any other way is an infrastructure failure."""

from __future__ import annotations

import os
import signal

import anyio
import pytest

from sandboxes import SandboxSpec, create_sandbox
from sandboxes import _helper_sandbox as helper_sandbox
from sandboxes._helper_sandbox import HelperSandbox
from sandboxes.docker import DockerSandbox
from sandboxes.process import ProcessSandbox

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(90)]

PROCESSES = "cat /proc/[0-9]*/cmdline | tr '\\0' ' '"


async def test_every_command_is_started_by_the_same_helper(spec: SandboxSpec) -> None:
    async with create_sandbox(spec) as sb:
        parents = {(await sb.exec(["sh", "-c", "echo $PPID"])).stdout for _ in range(5)}
        pid_ns = {(await sb.exec(["readlink", "/proc/self/ns/pid"])).stdout for _ in range(3)}
    assert len(parents) == 1
    if spec.backend != "gvisor":  # gVisor names namespaces afresh on every readlink
        assert len(pid_ns) == 1


@pytest.mark.parametrize(
    "attack",
    ["kill -9 $PPID; sleep 5", "kill -9 -1; sleep 1; exit 0", "kill -STOP -1; exit 0"],
    ids=["kill-ppid", "kill-all", "stop-all"],
)
async def test_a_command_that_kills_its_helper_fails_and_taints_the_sandbox(
    spec: SandboxSpec, attack: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A stopped helper is found when it misses its deadline (the exec's timeout plus a grace).
    monkeypatch.setattr(helper_sandbox, "KILL_GRACE_S", 1.0)
    async with create_sandbox(spec) as sb:
        killed = await sb.exec(["sh", "-c", attack], timeout=2)
        problems = await sb.validate()  # type: ignore[attr-defined]
        after = await sb.exec(["sh", "-c", "echo alive; echo $PPID"])
        again = await sb.exec(["sh", "-c", "echo $PPID"])
        tainted = sb.tainted  # type: ignore[attr-defined]
    # The agent's failure, as data: killed, with the reason on stderr; not an infra error.
    assert (killed.exit_code, killed.signal, killed.infra_error) == (137, 9, None)
    assert b"the sandbox's exec helper" in killed.stderr
    # The sandbox is never passed as fresh again, though it still runs commands.
    assert tainted is not None
    assert problems == [f"tainted: {tainted}"]
    assert after.stdout.startswith(b"alive\n")
    assert after.stdout.split()[1] == again.stdout.strip()  # the new helper stays


async def test_a_helper_lost_while_no_command_runs_is_an_infra_error(spec: SandboxSpec) -> None:
    async with create_sandbox(spec) as sb:
        assert isinstance(sb, HelperSandbox)
        await sb.exec(["true"])
        await _kill_helper_from_outside(sb)
        lost = await sb.exec(["echo", "hello"])
        after = await sb.exec(["echo", "alive"])
        tainted = sb.tainted
    assert lost.infra_error is not None
    assert tainted is None
    assert after.stdout == b"alive\n"  # replaced by a new helper


async def test_a_sandbox_killed_from_outside_during_a_command_is_an_infra_error(
    spec: SandboxSpec,
) -> None:
    async with create_sandbox(spec) as sb:
        assert isinstance(sb, HelperSandbox)
        async with anyio.create_task_group() as tg:

            async def kill_once_running() -> None:
                # The helper's S frame (command starting) sets this flag; no event to wait on.
                with anyio.fail_after(30):
                    while sb._helper is None or not sb._helper.command_running:  # noqa: ASYNC110
                        await anyio.sleep(0.01)
                await _kill_sandbox_from_outside(sb)

            tg.start_soon(kill_once_running)
            lost = await sb.exec(["sleep", "30"], timeout=60)
        tainted = sb.tainted
    assert lost.infra_error is not None, lost
    assert tainted is None


async def _kill_helper_from_outside(sb: HelperSandbox) -> None:
    """The helper dies of something other than a command: bubblewrap killed on the host
    (process), or the helper killed by a side `docker exec` (docker, gvisor)."""
    if isinstance(sb, ProcessSandbox):
        await _kill_sandbox_from_outside(sb)
        return
    assert isinstance(sb, DockerSandbox)
    assert sb._helper is not None
    killer = await sb._create_exec(
        ["/bin/sh", "-c", f"kill -9 {sb._helper.pid}"], stdin=False, env={}, cwd="/"
    )
    await killer.start(detach=True)
    assert await sb._wait_exec(killer) == 0


async def _kill_sandbox_from_outside(sb: HelperSandbox) -> None:
    """Bubblewrap killed on the host (process), the container killed through the daemon."""
    if isinstance(sb, ProcessSandbox):
        assert sb._proc is not None
        os.kill(sb._proc.pid, signal.SIGKILL)
        await sb._proc.wait()
        return
    assert isinstance(sb, DockerSandbox)
    assert sb._container is not None
    await sb._container.kill()


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


async def test_text_the_os_cannot_take_is_refused_like_a_shell_would(spec: SandboxSpec) -> None:
    # A lone surrogate has no bytes for execve: the exec fails (126/127), the helper lives on.
    async with create_sandbox(spec) as sb:
        before = await sb.exec(["sh", "-c", "echo $PPID"])
        in_argument = await sb.exec(["echo", "\ud800"])
        as_program = await sb.exec(["\ud800"])
        in_cwd = await sb.exec(["true"], cwd="\ud800")
        after = await sb.exec(["sh", "-c", "echo $PPID"])
    assert (in_argument.exit_code, in_argument.infra_error) == (126, None)
    assert b"surrogates not allowed" in in_argument.stderr
    assert (as_program.exit_code, as_program.infra_error) == (127, None)
    assert (in_cwd.exit_code, in_cwd.infra_error) == (126, None)
    assert after.stdout == before.stdout  # the same helper answered throughout


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
