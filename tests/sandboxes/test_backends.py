"""Behaviour every real backend shares: results, stdin, environment, lifecycle, reset."""

from __future__ import annotations

import pytest

from sandboxes import (
    ExecResult,
    SandboxClosedError,
    SandboxConfigError,
    SandboxFileError,
    SandboxSpec,
    SandboxStateError,
    create_sandbox,
)

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(60)]


async def test_exit_codes_signals_and_output_are_reported_apart(spec: SandboxSpec) -> None:
    async with create_sandbox(spec) as sb:
        ok = await sb.exec("echo out; echo err >&2")
        failing = await sb.exec(["sh", "-c", "exit 3"])
        killed = await sb.exec(["sh", "-c", "kill -9 $$"])
    assert (ok.exit_code, ok.stdout, ok.stderr, ok.ok) == (0, b"out\n", b"err\n", True)
    assert (failing.exit_code, failing.signal, failing.infra_error) == (3, None, None)
    assert (killed.exit_code, killed.signal, killed.timed_out) == (137, 9, False)


async def test_stdin_larger_than_a_pipe_buffer_round_trips(spec: SandboxSpec) -> None:
    data = bytes(range(256)) * 2048  # 512 KiB
    async with create_sandbox(spec) as sb:
        result = await sb.exec(["cat"], stdin=data)
        empty = await sb.exec(["cat"], stdin=b"")
    assert result.stdout == data
    assert not result.stdout_truncated
    assert empty.stdout == b""
    assert empty.exit_code == 0


async def test_env_and_cwd_apply_to_one_exec(spec: SandboxSpec) -> None:
    async with create_sandbox(spec) as sb:
        await sb.exec(["mkdir", "-p", "sub"])
        result = await sb.exec(
            ["sh", "-c", 'echo "$GREETING"; pwd'], env={"GREETING": "hi"}, cwd="sub"
        )
        plain = await sb.exec(["sh", "-c", 'echo "${GREETING-unset}"'])
    assert result.stdout == f"hi\n{spec.workdir}/sub\n".encode()
    assert plain.stdout == b"unset\n"


async def test_files_persist_between_execs_and_reset_empties_the_work_dir(
    spec: SandboxSpec,
) -> None:
    async with create_sandbox(spec) as sb:
        await sb.put_file("pkg/main.py", b"print('hi')\n")
        ran = await sb.exec(["python3", "pkg/main.py"])
        await sb.reset()
        gone = await sb.exec(["python3", "pkg/main.py"])
        with pytest.raises(SandboxFileError):
            await sb.get_file("pkg/main.py")
    assert ran.stdout == b"hi\n"
    assert gone.exit_code != 0


async def test_background_process_does_not_outlive_its_exec(spec: SandboxSpec) -> None:
    async with create_sandbox(spec) as sb:
        started = await sb.exec(["sh", "-c", "nohup sleep 600.25 >/dev/null 2>&1 &"])
        after = await sb.exec(["sh", "-c", "cat /proc/[0-9]*/cmdline 2>/dev/null | tr '\\0' ' '"])
    assert started.exit_code == 0
    assert started.duration_s < 5
    assert b"600.25" not in after.stdout


async def test_calls_outside_the_lifecycle_raise_state_errors(spec: SandboxSpec) -> None:
    sb = create_sandbox(spec)
    with pytest.raises(SandboxStateError):
        await sb.exec(["true"])
    await sb.start()
    await sb.close()
    await sb.close()  # idempotent
    with pytest.raises(SandboxClosedError):
        await sb.exec(["true"])


async def test_bad_commands_are_config_errors_naming_the_problem(spec: SandboxSpec) -> None:
    async with create_sandbox(spec) as sb:
        with pytest.raises(SandboxConfigError, match="empty argv"):
            await sb.exec([])
        with pytest.raises(SandboxConfigError, match="timeout"):
            await sb.exec(["true"], timeout=0)
        with pytest.raises(SandboxConfigError, match="environment variable name"):
            await sb.exec(["true"], env={"A=B": "x"})
        missing = await sb.exec(["roost-no-such-program"])
    assert isinstance(missing, ExecResult)
    assert missing.exit_code not in (0, None)
    assert missing.infra_error is None
