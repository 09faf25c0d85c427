"""A run stopped mid-RL (as Ctrl-C stops it) drains, checkpoints, and resumes: the version
count continues, no recorded trajectory is lost, and no sample is trained on twice."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from actors.learner import load_checkpoint
from roost.train.config import TrainConfig
from roost.train.lineage import trace_lineage
from roost.train.records import StepRecord, TrajectoryRecord
from roost.train.run import train
from roost.train.rundir import RunDir
from roost.train.summary import load_run_records
from tests.train.conftest import train_stopped_at, with_max_versions

pytestmark = pytest.mark.anyio


async def test_resume_continues_versions_and_keeps_every_record(
    tiny_config: TrainConfig, tmp_path: Path
) -> None:
    out = tmp_path / "run"
    run = RunDir(out)
    config = with_max_versions(tiny_config, 6)
    first = await train_stopped_at(config, out, stop_at=2)
    progress = json.loads(run.progress_file.read_text())
    assert progress["rl"]["done"] is False
    assert "after_rl" not in progress["evals"]
    assert first["requested"] == first["scored"] + first["failed"] + first["cancelled"]
    stopped_at = load_checkpoint(run.checkpoints).version
    assert stopped_at >= 2
    before, _ = load_run_records(run)
    before_ids = {r.rollout_id for r in before if isinstance(r, TrajectoryRecord)}

    second = await train(config, out)
    records, problems = load_run_records(run)
    assert problems == []
    trajectories = trace_lineage(records).trajectories
    ids = [r.rollout_id for r in trajectories]
    assert len(ids) == len(set(ids)), "a rollout recorded twice"
    assert before_ids <= set(ids), "a recorded trajectory was lost"
    assert any(i.startswith("s1-") for i in ids)
    versions = [r.version for r in records if isinstance(r, StepRecord)]
    assert versions == list(range(1, versions[-1] + 1)), "the version count did not continue"
    assert versions[-1] >= 6
    # Samples of the first segment are never consumed again after the resume.
    consumed_again = [
        r.rollout_id
        for r in trajectories
        if r.rollout_id.startswith("s0-") and (r.consumed_version or 0) > stopped_at
    ]
    assert consumed_again == []
    assert second["requested"] == second["scored"] + second["failed"] + second["cancelled"]
    assert second["heldout_pass_rate_after_rl"] is not None
    assert second["segments"] == 2
    assert set(second["machines"]) == {"0", "1"}  # each segment says where it ran
