"""A `kill -9` between the learner's checkpoint and the collector's log: checkpoint V holds
samples whose `StepRecord` V never reached the log. The resume records them as trained at V
(the checkpoint's consumed set says so), not cancelled, and the versions stay 1..V once each.
Scored records are written when scored (since 2026-12-08), so they keep their reward and turns
through the kill; logs of the format before, which wrote them at their step, still resume."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import msgspec
import pytest
import torch

from actors.learner import Checkpoint
from actors.recorder import Recorder
from roost.train.config import load_train_config
from roost.train.lineage import trace_lineage
from roost.train.records import (
    RequestRecord,
    ResumeRecord,
    RunRecord,
    SettledRecord,
    StepRecord,
    TrajectoryRecord,
    TurnRecord,
)
from roost.train.run import _close_earlier_segments
from roost.train.rundir import RunDir
from roost.train.summary import load_run_records, summarize
from runtime import ActorSystem, encode
from runtime.journal import JournalWriter
from tests.train.conftest import TINY

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(60)]


def _scored(rollout_id: str, version: int | None, reward: float) -> TrajectoryRecord:
    return TrajectoryRecord(
        rollout_id=rollout_id,
        task_id="t",
        level=1,
        demo_level=True,
        status="scored",
        reward=reward,
        passed=reward == 1.0,
        consumed_version=version,
    )


def _checkpoint(version: int, consumed: list[str]) -> Checkpoint:
    return Checkpoint(
        model={},
        optimizer={},
        version=version,
        torch_rng=torch.get_rng_state(),
        python_rng=None,
        consumed=consumed,
        curriculum=json.dumps({"elapsed_s": 12.5}).encode(),
    )


def _killed_run(root: Path, records: list[RunRecord]) -> RunDir:
    run = RunDir(root)
    run.create()
    writer = JournalWriter(run.log)
    for record in records:
        writer.append(encode(record))
    writer.sync()
    writer.close()
    return run


async def _resume(run: RunDir, resume: Checkpoint) -> list[Any]:
    source: Any = SimpleNamespace(is_demo_level=lambda level: level == 1)
    async with ActorSystem() as system:
        recorder = system.spawn(lambda: Recorder(run.log), name="recorder")
        await _close_earlier_segments(run, source, recorder, resume, segment=1)
    records, problems = load_run_records(run)
    assert problems == []
    return records


def _request(group: str, n: int = 2) -> RequestRecord:
    ids = [f"{group}/{i}" for i in range(n)]
    return RequestRecord(group_id=group, task_id="t", level=1, rollout_ids=ids, wall=0.0)


def _step(version: int, rollouts: list[str]) -> StepRecord:
    return StepRecord(
        version=version,
        samples=len(rollouts),
        reward_mean=0.5,
        pass_rate=0.5,
        wall=0.0,
        elapsed_s=1.0,
        rollout_ids=rollouts,
    )


def _v1_logged(groups: int) -> list[RunRecord]:
    """Requests for groups s0-g0.. of two rollouts each, and s0-g0 trained and logged as v1."""
    return [
        *(_request(f"s0-g{g}") for g in range(groups)),
        _scored("s0-g0/0", 1, 1.0),
        _scored("s0-g0/1", 1, 0.0),
        _step(1, ["s0-g0/0", "s0-g0/1"]),
    ]


async def test_rollouts_trained_in_a_checkpoint_but_not_logged_are_recorded_trained(
    tmp_path: Path,
) -> None:
    # v1 logged whole; v2 checkpointed, then the kill: s0-g1's scored records and StepRecord
    # 2 never reached the log. s0-g2/0 failed (logged at once); s0-g2/1 was still running.
    run = _killed_run(
        tmp_path / "run",
        [
            *_v1_logged(3),
            TrajectoryRecord(
                rollout_id="s0-g2/0", task_id="t", level=1, demo_level=True, status="failed"
            ),
        ],
    )
    consumed = ["s0-g0/0#0", "s0-g0/1#0", "s0-g1/0#0", "s0-g1/0#1", "s0-g1/1#0"]

    records = await _resume(run, _checkpoint(2, consumed))

    lineage = trace_lineage(records)
    assert [s.version for s in lineage.steps] == [1, 2]
    assert lineage.open == []
    step = lineage.steps[1]
    assert step.rollout_ids == ["s0-g1/0", "s0-g1/1"]
    assert step.samples == 3
    assert step.elapsed_s == 12.5
    by_id = {t.rollout_id: t for t in lineage.trajectories}
    for rollout_id in ("s0-g1/0", "s0-g1/1"):
        assert by_id[rollout_id].status == "scored"
        assert by_id[rollout_id].consumed_version == 2
    assert by_id["s0-g2/1"].status == "cancelled"
    resumed = [r for r in records if isinstance(r, ResumeRecord)]
    assert [(r.version, r.cancelled) for r in resumed] == [(2, 1)]
    # The recovered records come before the resume mark, so it keeps them in the lineage.
    assert records.index(resumed[0]) == len(records) - 1

    summary = summarize(run, _tiny_config(tmp_path), {}, {})
    assert summary["balanced"] is True
    assert summary["trained_twice"] == 0
    assert summary["requested"] == 6
    assert (summary["scored"], summary["failed"], summary["cancelled"]) == (4, 1, 1)
    assert summary["scored_not_trained"] == 0


async def test_a_lagging_collector_leaves_every_missing_version_recorded_once(
    tmp_path: Path,
) -> None:
    # The collector had written v2's trajectories but not its StepRecord, nor anything of v3
    # (the checkpoint's version) when the process died.
    run = _killed_run(
        tmp_path / "run",
        [
            *_v1_logged(3),
            _scored("s0-g1/0", 2, 1.0),
            _scored("s0-g1/1", 2, 1.0),
        ],
    )
    consumed = [f"s0-g{g}/{i}#0" for g in range(3) for i in range(2)]

    records = await _resume(run, _checkpoint(3, consumed))

    lineage = trace_lineage(records)
    assert [s.version for s in lineage.steps] == [1, 2, 3]
    assert lineage.steps[1].rollout_ids == ["s0-g1/0", "s0-g1/1"]
    assert lineage.steps[1].pass_rate == 1.0  # from the records the log kept
    assert lineage.steps[2].rollout_ids == ["s0-g2/0", "s0-g2/1"]
    trained = [rid for step in lineage.steps for rid in step.rollout_ids]
    assert sorted(trained) == sorted({c.split("#")[0] for c in consumed})
    assert lineage.open == []
    assert [r.cancelled for r in records if isinstance(r, ResumeRecord)] == [0]


async def test_a_resume_from_a_logged_checkpoint_still_cancels_what_was_open(
    tmp_path: Path,
) -> None:
    run = _killed_run(
        tmp_path / "run",
        [
            *_v1_logged(2),
        ],
    )

    records = await _resume(run, _checkpoint(1, ["s0-g0/0#0", "s0-g0/1#0"]))

    lineage = trace_lineage(records)
    assert [s.version for s in lineage.steps] == [1]
    assert sum(isinstance(r, StepRecord) for r in records) == 1  # nothing written twice
    statuses = {t.rollout_id: t.status for t in lineage.trajectories}
    assert statuses["s0-g1/0"] == statuses["s0-g1/1"] == "cancelled"


def _written_when_scored(rollout_id: str, reward: float, scored_at: float) -> TrajectoryRecord:
    """A scored record as the collector writes it now: before any step consumed it."""
    turn = TurnRecord(text="return x", passed=reward == 1.0, score=reward)
    return msgspec.structs.replace(
        _scored(rollout_id, None, reward), scored_at=scored_at, turns=[turn]
    )


async def test_a_kill_before_the_step_is_logged_keeps_every_scored_result(tmp_path: Path) -> None:
    # v1 logged (its records first, then the step naming them); s0-g1 scored, trained into
    # checkpoint 2, whose StepRecord never reached the log; s0-g2/0 scored but not trained;
    # s0-g2/1 still running at the kill.
    first = _step(1, ["s0-g0/0", "s0-g0/1"])
    run = _killed_run(
        tmp_path / "run",
        [
            *(_request(f"s0-g{g}") for g in range(3)),
            _written_when_scored("s0-g0/0", 1.0, scored_at=10.0),
            _written_when_scored("s0-g0/1", 0.0, scored_at=11.0),
            msgspec.structs.replace(first, at=14.0),
            _written_when_scored("s0-g1/0", 1.0, scored_at=15.0),
            _written_when_scored("s0-g1/1", 0.25, scored_at=16.0),
            _written_when_scored("s0-g2/0", 0.5, scored_at=17.0),
        ],
    )
    consumed = ["s0-g0/0#0", "s0-g0/1#0", "s0-g1/0#0", "s0-g1/1#0", "s0-g1/1#1"]

    records = await _resume(run, _checkpoint(2, consumed))

    lineage = trace_lineage(records)
    assert [s.version for s in lineage.steps] == [1, 2]
    assert lineage.steps[1].rollout_ids == ["s0-g1/0", "s0-g1/1"]
    assert lineage.steps[1].samples == 3
    assert lineage.steps[1].reward_mean == pytest.approx(0.625)  # from the kept rewards
    by_id = {t.rollout_id: t for t in lineage.trajectories}
    assert [by_id[f"s0-g0/{i}"].learner_wait_s for i in range(2)] == [4.0, 3.0]
    for rollout_id, reward in (("s0-g1/0", 1.0), ("s0-g1/1", 0.25)):
        kept = by_id[rollout_id]
        assert (kept.status, kept.consumed_version, kept.reward) == ("scored", 2, reward)
        assert kept.turns  # nothing lost with the process
        assert kept.reason == ""
    untrained = by_id["s0-g2/0"]
    assert (untrained.status, untrained.consumed_version, untrained.reward) == ("scored", None, 0.5)
    assert by_id["s0-g2/1"].status == "cancelled"
    assert [r.cancelled for r in records if isinstance(r, ResumeRecord)] == [1]
    assert not any(isinstance(r, TrajectoryRecord) and "lost" in r.reason for r in records)

    summary = summarize(run, _tiny_config(tmp_path), {}, {})
    assert summary["balanced"] is True
    assert summary["trained_twice"] == 0
    assert (summary["scored"], summary["failed"], summary["cancelled"]) == (5, 0, 1)
    assert summary["scored_not_trained"] == 1


def test_reading_the_log_joins_steps_and_settlements_to_the_records_written_before() -> None:
    step = msgspec.structs.replace(_step(1, ["a/0", "a/1"]), at=9.0)
    lineage = trace_lineage(
        [
            _written_when_scored("a/0", 1.0, scored_at=5.0),
            _written_when_scored("a/1", 0.0, scored_at=6.0),
            _written_when_scored("b/0", 1.0, scored_at=7.0),
            _written_when_scored("b/1", 1.0, scored_at=7.5),
            step,
            SettledRecord(rollout_ids=["b/0", "b/1"], reason="not trained: no signal", wall=0.0),
            _written_when_scored("c/0", 0.0, scored_at=8.0),
            msgspec.structs.replace(_step(2, ["c/0"]), at=10.0),
            ResumeRecord(segment=1, version=1, cancelled=0, wall=0.0),  # v2 was lost
        ]
    )
    by_id = {t.rollout_id: t for t in lineage.trajectories}
    assert [(by_id[r].consumed_version, by_id[r].learner_wait_s) for r in ("a/0", "a/1")] == [
        (1, 4.0),
        (1, 3.0),
    ]
    assert {by_id[r].reason for r in ("b/0", "b/1")} == {"not trained: no signal"}
    assert by_id["b/0"].consumed_version is None
    assert (by_id["c/0"].consumed_version, by_id["c/0"].learner_wait_s) == (None, None)
    assert (lineage.void_steps, lineage.trained_in_lost_steps) == (1, 1)
    assert [s.version for s in lineage.steps] == [1]


def _tiny_config(tmp_path: Path) -> Any:
    path = tmp_path / "tiny.toml"
    path.write_text(TINY)
    return load_train_config(path)
