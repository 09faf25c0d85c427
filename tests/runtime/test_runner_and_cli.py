"""The runner picks the loop; the `roost` command answers --help everywhere."""

from __future__ import annotations

import asyncio
import json

import pytest
from click.testing import CliRunner

from roost.cli import cli
from runtime import run
from runtime.clock import VirtualClockEventLoop


async def _loop_kind() -> str:
    return type(asyncio.get_running_loop()).__module__


def test_run_uses_uvloop_when_installed() -> None:
    assert run(_loop_kind).startswith("uvloop")
    assert run(_loop_kind, use_uvloop=False).startswith("asyncio")


def test_run_with_virtual_clock_jumps_time() -> None:
    async def sleepy() -> tuple[bool, float]:
        loop = asyncio.get_running_loop()
        await asyncio.sleep(3600)
        return isinstance(loop, VirtualClockEventLoop), loop.time()

    is_virtual, clock = run(sleepy, virtual_clock=True)
    assert is_virtual
    assert clock == pytest.approx(3600.0)


@pytest.mark.parametrize("args", [[], ["bench"], ["bench", "runtime"]])
def test_every_command_has_help(args: list[str]) -> None:
    result = CliRunner().invoke(cli, [*args, "--help"])
    assert result.exit_code == 0, result.output
    assert "Usage:" in result.output


def test_bench_runtime_json_has_the_named_keys() -> None:
    result = CliRunner().invoke(cli, ["bench", "runtime", "--json", "--quick", "--repeats", "1"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    for key in (
        "actor_pipeline_msgs_per_s",
        "queue_pipeline_msgs_per_s",
        "pipeline_ratio",
        "actor_ask_per_s",
        "future_pingpong_per_s",
        "ask_ratio",
    ):
        assert data[key] > 0, key
