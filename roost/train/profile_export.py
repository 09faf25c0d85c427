"""The run log as `roost profile` reads it: `rollouts.jsonl` and `learner_steps.jsonl`.

Written from `trajectories.log` at the end of a run and by `roost report`, so `roost profile
RUN_DIR` works on every training run. A learner step's wait starts when the previous step
ended (the first: when the first rollout of its segment was requested) and its batch was
ready when the last rollout it consumed finished.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from roost.profile.model import LearnerStep, RolloutTiming
from roost.profile.sources import LEARNER_STEPS, ROLLOUTS, write_jsonl
from roost.train.records import StepRecord, TrajectoryRecord
from roost.train.rundir import RunDir

__all__ = ["export_profile_inputs"]


def export_profile_inputs(run: RunDir, records: Sequence[Any]) -> None:
    trajectories = [r for r in records if isinstance(r, TrajectoryRecord)]
    write_jsonl(run.root / ROLLOUTS, [_timing(r) for r in trajectories])
    finished = {r.rollout_id: r.finished_at for r in trajectories}
    steps: list[LearnerStep] = []
    previous: float | None = None
    for step in (r for r in records if isinstance(r, StepRecord)):
        if step.at <= 0:
            continue  # written before steps carried the loop clock
        ends = [finished[i] for i in step.rollout_ids if i in finished]
        started = (
            previous if previous is not None and previous <= step.at else min(ends, default=step.at)
        )
        ready = min(max([started, *ends]), step.at)
        steps.append(
            LearnerStep(
                version=step.version,
                wait_started_at=min(started, ready),
                batch_ready_at=ready,
                finished_at=step.at,
                rollout_ids=list(step.rollout_ids),
            )
        )
        previous = step.at
    write_jsonl(run.root / LEARNER_STEPS, steps)


def _timing(record: TrajectoryRecord) -> RolloutTiming:
    status = {"scored": "completed"}.get(record.status, record.status)
    return RolloutTiming(
        rollout_id=record.rollout_id,
        status=status,
        requested_at=record.requested_at,
        finished_at=max(record.finished_at, record.requested_at),
        queue_wait_s=max(0.0, record.queue_wait_s),
        acquire_s=max(0.0, record.acquire_s),
        generate_s=max(0.0, record.generate_s),
        exec_s=max(0.0, record.exec_s),
        evaluate_s=max(0.0, record.evaluate_s),
        learner_wait_s=max(0.0, record.learner_wait_s or 0.0),
    )
