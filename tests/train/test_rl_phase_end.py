"""The RL phase's episodes end with the phase: none outlives the drain into the evaluations."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import msgspec
import pytest

import roost.train.rl
import roost.train.run
from roost.train.config import TrainConfig
from roost.train.run import train
from roost.train.rundir import RunDir
from sandboxes._protocol import Sandbox
from tasks import Task, Verdict

pytestmark = pytest.mark.anyio


class HangingVerifier:
    """Never answers: every RL episode is still running its tests when the drain times out."""

    started = 0
    running = 0
    hung = anyio.Event()

    async def verify(self, task: Task, text: str, sandbox: Sandbox) -> Verdict:
        cls = HangingVerifier
        cls.started += 1
        cls.running += 1
        cls.hung.set()
        try:
            await anyio.sleep_forever()
        finally:
            cls.running -= 1
        raise AssertionError("unreachable")


async def test_episodes_past_the_drain_are_stopped_before_the_evaluation_after_rl(
    tiny_config: TrainConfig, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    HangingVerifier.started = HangingVerifier.running = 0
    HangingVerifier.hung = anyio.Event()
    monkeypatch.setattr(roost.train.rl, "TestsVerifier", HangingVerifier)
    seen: dict[str, tuple[int, int]] = {}
    evaluate = roost.train.run.evaluate_heldout

    async def watched(weights: Any, heldout: Any, **kwargs: Any) -> Any:
        # What still runs of the RL phase as each evaluation starts.
        stage = "after_sft" if not seen else "after_rl"
        if stage == "after_rl":
            await HangingVerifier.hung.wait()  # the phase did start episodes
        seen[stage] = (HangingVerifier.running, kwargs["pool"].statistics().busy)
        # Failing here, not after train: a sandbox still held would keep the evaluation waiting.
        assert stage == "after_sft" or seen[stage] == (0, 0), seen
        return await evaluate(weights, heldout, **kwargs)

    monkeypatch.setattr(roost.train.run, "evaluate_heldout", watched)
    rl = msgspec.structs.replace(tiny_config.rl, time_budget_s=3.0, drain_timeout_s=0.2)
    config = msgspec.structs.replace(tiny_config, rl=rl, control=False)
    out = tmp_path / "run"
    await train(config, out)

    assert HangingVerifier.started > 0
    assert seen["after_rl"] == (0, 0)  # no episode's tests run on, no sandbox is held
    summary = json.loads(RunDir(out).summary.read_text())
    assert summary["requested"] > 0
    assert summary["requested"] == summary["scored"] + summary["failed"] + summary["cancelled"]
    assert summary["cancelled"] >= HangingVerifier.started
