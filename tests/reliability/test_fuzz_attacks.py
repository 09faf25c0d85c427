"""The isolation suite's attacks (sandboxes/checks.py) sent as model actions through the real
episode path: scheduler → sandbox worker → warm process-backend pool, with a scripted model.

Each attack's action exits 0 only if the attack achieved its goal from inside. Every one must be
contained (the host-side check sees nothing) and scored as an agent failure: the rollout
*completes* with `passed=False` on its first attempt (never an infrastructure failure, which
would be retried and would quarantine sandboxes). Afterwards the same pool still runs honest
episodes, and none of the attackers' processes is left on the host.
"""

from __future__ import annotations

import os
import secrets
import tempfile
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import msgspec
import pytest

from actors.rollouts import RolloutFinished, RolloutRequest
from actors.sandbox_worker import Action
from roost.reliability.episodes import EpisodeDriver, ScriptedActions
from sandboxes import SandboxSpec
from sandboxes import _helper_sandbox as helper_sandbox
from sandboxes._spec import ExecResult, MiB
from sandboxes.checks import _existing, _host_pids_with
from sandboxes.factory import create_sandbox
from sandboxes.pool import SandboxPool
from tests.sandboxes.conftest import require_backend

pytestmark = pytest.mark.anyio

SPEC = SandboxSpec(backend="process", memory=64 * MiB, disk=8 * MiB, pids=32, timeout_s=10.0)
MARK = f"{800 + secrets.randbelow(9000)}.{secrets.randbelow(10**6)}"


@pytest.fixture
def anyio_backend() -> Any:
    return ("asyncio", {})  # real processes need the real clock


def _py(code: str, *, timeout: float = 20.0) -> Action:
    return Action(["python3", "-c", code], timeout=timeout)


def _attacks(host: dict[str, Any]) -> dict[str, Action]:
    """task id → the action that attacks; exit status 0 means the attack got what it wanted."""
    return {
        "fork-bomb": Action(["sh", "-c", f": {MARK}; f() {{ f & f; }}; f"], timeout=2),
        "memory-bomb": _py(f"b = b'x' * {SPEC.memory * 4}; print(len(b))"),
        "disk-fill": _py(
            f"n = 0\nwith open('fill', 'wb') as f:\n    while n < {2 * SPEC.disk}:\n"
            "        f.write(b'0' * 1048576); f.flush(); n += 1048576\n"
        ),
        "network": _py(
            f"import socket; socket.create_connection(('127.0.0.1', {host['port']}), timeout=2)"
        ),
        "dns": _py("import socket; socket.getaddrinfo('deb.debian.org', 80)"),
        "host-processes": _py(
            "import os, sys\n"
            # Spelled backwards, so that this program's own command line does not match.
            f"mark = '{host['sleep_mark'][::-1]}'[::-1].encode()\n"
            "for p in filter(str.isdigit, os.listdir('/proc')):\n"
            "    try:\n"
            "        if mark in open(f'/proc/{p}/cmdline', 'rb').read():\n"
            "            sys.exit(0)\n"
            "    except OSError:\n        pass\n"
            "sys.exit(1)"
        ),
        "secret-file": Action(
            ["sh", "-c", f"cat {host['secret']} || cat /proc/1/root{host['secret']}"]
        ),
        # Inside the process backend `/` and `/etc` are a per-exec tmpfs, so writing there works
        # and reaches nothing: success is the host's world-writable directory being written.
        "write-outside": Action(
            [
                "sh",
                "-c",
                "".join(f"(echo x > {t}) 2>/dev/null; " for t in host["targets"][1:])
                + f"echo x > {host['targets'][0]}",
            ]
        ),
        "root": Action(["sh", "-c", 'test "$(id -u)" = 0']),
        "timeout-tree": Action(
            [
                "sh",
                "-c",
                f"setsid sleep {MARK}1 & nohup sleep {MARK}2 >/dev/null 2>&1 & "
                f"sh -c 'trap \"\" TERM HUP INT; sleep {MARK}3' & trap '' TERM; sleep {MARK}4",
            ],
            timeout=1,
        ),
        "output-flood": Action(["sh", "-c", "yes | head -c 67108864; exit 3"], timeout=20),
        "plant-symlinks": Action(
            ["sh", "-c", "ln -s /etc/passwd solution.py && ln -s / up; exit 1"]
        ),
        "lock-workdir": Action(["sh", "-c", "chmod 000 . ; exit 1"]),
    }


@pytest.fixture
async def host() -> AsyncIterator[dict[str, Any]]:
    """What lives on the host for the attacks to go after: a TCP listener, a process, a
    world-readable secret and a world-writable directory."""
    accepted: list[int] = []

    async def count(stream: Any) -> None:
        accepted.append(1)
        await stream.aclose()

    sleep_mark = f"{900 + secrets.randbelow(9000)}.{secrets.randbelow(10**6)}"
    listener = await anyio.create_tcp_listener(local_host="127.0.0.1")
    port = listener.extra(anyio.abc.SocketAttribute.local_port)
    proc = await anyio.open_process(["sleep", sleep_mark])
    with tempfile.TemporaryDirectory(prefix="roost-attack-") as tmp:
        os.chmod(tmp, 0o777)
        secret = Path(tmp) / "secret.txt"
        secret.write_text(secrets.token_hex(16))
        secret.chmod(0o644)
        name = f"roost-escape-{secrets.token_hex(4)}"
        targets = [f"{tmp}/{name}", f"/usr/{name}", f"/etc/{name}", f"/{name}", f"/var/tmp/{name}"]
        try:
            async with listener, anyio.create_task_group() as tg:
                tg.start_soon(listener.serve, count)
                yield {
                    "port": port,
                    "accepted": accepted,
                    "sleep_mark": sleep_mark,
                    "secret": str(secret),
                    "targets": targets,
                }
                tg.cancel_scope.cancel()
        finally:
            proc.kill()
            await proc.aclose()


async def _run(driver: EpisodeDriver, requests: list[RolloutRequest]) -> list[RolloutFinished]:
    for request in requests:
        await driver.submit(request)
    return [await driver.next_finished(timeout=90) for _ in requests]


async def test_fuzz_attacks_as_episode_actions_are_contained_and_scored_as_agent_failures(
    host: dict[str, Any],
) -> None:
    require_backend("process")
    attacks = _attacks(host)
    honest = {f"honest-{i}": [Action(["sh", "-c", "echo ok > out && cat out"])] for i in range(6)}
    actions = ScriptedActions({**{k: [v] for k, v in attacks.items()}, **honest})
    async with (
        SandboxPool(lambda key: create_sandbox(SPEC), capacity=4) as pool,
        EpisodeDriver(pool, actions, workers=4) as driver,
    ):
        records = await _run(
            driver, [RolloutRequest(rollout_id=k, task_id=k, max_steps=1) for k in attacks]
        )
        # The same (reset) sandboxes still serve honest episodes, and pass them.
        after = await _run(
            driver, [RolloutRequest(rollout_id=k, task_id=k, max_steps=1) for k in honest]
        )
        stats = await driver.statistics()
        pool_stats = pool.statistics()

    by_id = {r.rollout_id: r for r in records}
    assert sorted(by_id) == sorted(attacks)
    for name, record in by_id.items():
        assert (record.status, record.passed, record.attempts) == ("completed", False, 1), (
            name,
            record,
        )
    assert all(r.status == "completed" and r.passed for r in after)
    assert stats.balanced
    assert stats.retries == 0
    assert stats.failed == 0
    # Agent failures cost no sandbox: not even `chmod 000 .` defeats the reset.
    assert pool_stats.quarantined == 0

    # Host side: nothing reached, nothing written, nothing left running.
    assert host["accepted"] == []
    assert _existing(host["targets"]) == []
    assert _host_pids_with(MARK) == []


@pytest.fixture(params=["process", "docker", "gvisor"])
def backend(request: pytest.FixtureRequest) -> str:
    name: str = request.param
    require_backend(name)  # outside the event loop: it may ask dockerd
    return name


@pytest.mark.parametrize(
    "attack", ["kill -9 -1; sleep 1; exit 0", "kill -STOP -1; exit 0"], ids=["kill", "stop"]
)
async def test_fuzz_attacks_kill_everything_is_scored_as_an_agent_failure(
    backend: str, attack: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`kill -9 -1` kills the sandbox's exec helper too (it runs as the same user), and
    `kill -STOP -1` stops it: that is the command's doing, so the episode fails on its first
    attempt (no infra retry), and the sandbox it tainted fails validation and is destroyed
    instead of being leased again."""
    monkeypatch.setattr(helper_sandbox, "KILL_GRACE_S", 1.0)  # a stopped helper's deadline
    spec = msgspec.structs.replace(SPEC, backend=backend)
    actions = ScriptedActions(
        {
            "kill": [Action(["sh", "-c", attack], timeout=2)],
            "honest": [Action(["sh", "-c", "echo ok > out && cat out"])],
        }
    )
    async with (
        SandboxPool(lambda key: create_sandbox(spec), capacity=1) as pool,
        EpisodeDriver(pool, actions, workers=1) as driver,
    ):
        (record,) = await _run(
            driver, [RolloutRequest(rollout_id="k", task_id="kill", max_steps=1)]
        )
        (honest,) = await _run(driver, [RolloutRequest(rollout_id="h", task_id="honest")])
        stats = await driver.statistics()
        await pool.settle()
        pool_stats = pool.statistics()
    assert stats.balanced
    assert (stats.retries, stats.failed) == (0, 0)
    assert (record.status, record.passed, record.attempts) == ("completed", False, 1)
    assert (honest.status, honest.passed, honest.attempts) == ("completed", True, 1)
    # The tainted sandbox was replaced: two starts, one validation failure, no quarantine.
    assert (pool_stats.starts, pool_stats.validation_failures) == (2, 1)
    assert pool_stats.quarantined == 0


async def test_fuzz_attacks_a_nul_byte_in_an_action_is_an_agent_failure() -> None:
    """A NUL byte cannot be passed in an argv: the model's action is refused as a shell refuses
    a command it cannot run (exit 126, the reason on stderr, for the model to see), the episode
    goes on, and it is scored, never recorded as an error or retried as infra."""
    require_backend("process")
    seen: list[ExecResult | None] = []

    def script(request: RolloutRequest, step: int, last: ExecResult | None) -> Action:
        seen.append(last)
        if step == 0 or request.task_id == "nul-only":
            return Action(["sh", "-c", "echo a\0b"])
        return Action(["true"])

    async with (
        SandboxPool(lambda key: create_sandbox(SPEC), capacity=2) as pool,
        EpisodeDriver(pool, ScriptedActions(default=script), workers=2) as driver,
    ):
        records = await _run(
            driver,
            [
                RolloutRequest(rollout_id="once", task_id="nul-then-fix", max_steps=2),
                RolloutRequest(rollout_id="only", task_id="nul-only", max_steps=1),
            ],
        )
        stats = await driver.statistics()
    by_id = {r.rollout_id: r for r in records}
    assert (by_id["only"].status, by_id["only"].passed, by_id["only"].attempts) == (
        "completed",
        False,
        1,
    )
    assert (by_id["once"].status, by_id["once"].passed) == ("completed", True)
    (refused,) = [r for r in seen if r is not None]
    assert refused.exit_code == 126
    assert b"bad action" in refused.stderr
    assert b"NUL byte" in refused.stderr
    assert (stats.retries, stats.failed) == (0, 0)
