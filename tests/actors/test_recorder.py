"""The recorder writes every record it is told; they read back typed, in order."""

from __future__ import annotations

from pathlib import Path

import pytest

from actors.recorder import Flush, Recorder, read_records
from actors.rollouts import RolloutFinished
from runtime import ActorSystem

pytestmark = pytest.mark.anyio


def finished(i: int) -> RolloutFinished:
    return RolloutFinished(
        rollout_id=f"r{i}", task_id="t", group="g", runtime="python", tenant="x", status="completed"
    )


async def test_records_read_back_in_order_and_survive_a_restart(tmp_path: Path) -> None:
    path = tmp_path / "trajectories.msgpack"
    async with ActorSystem(lag_interval=None) as system:
        recorder = system.spawn(lambda: Recorder(path), name="recorder")
        for i in range(50):
            await recorder.tell(finished(i))
        assert await recorder.ask(Flush(), timeout=5.0) == 50
    async with ActorSystem(lag_interval=None) as system:
        recorder = system.spawn(lambda: Recorder(path), name="recorder")
        await recorder.tell(finished(50))
    records, report, bad = read_records(path, RolloutFinished)
    assert [r.rollout_id for r in records] == [f"r{i}" for i in range(51)]
    assert not report.torn
    assert bad == []
