"""What a run log means after crashes: which steps survive, which rollouts are still open.

A run killed at any moment (`kill -9`, a power loss) leaves a log that is whole up to its last
complete record, and checkpoints that are whole (written atomically). Two things then need
working out, here, from the log alone:

- **Open rollouts.** Every requested group is logged (`RequestRecord`) before its requests
  reach the scheduler, so the rollouts requested but without a terminal record are exactly
  the ones in flight (or scored and waiting for the learner) when the process died. A resume
  closes each with a `cancelled` record, so the books balance and none is forgotten.
- **Lost steps.** The learner resumes from its newest checkpoint, which can be older than its
  last logged step. A `ResumeRecord` marks the version it resumed from: steps above it logged
  before it never reached a checkpoint, so they are void, and the samples they consumed count
  as not trained on. The version count continues from the checkpoint, so each version of the
  surviving lineage is logged exactly once and no rollout is trained on in two of them.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

import msgspec

from roost.train.records import RequestRecord, ResumeRecord, StepRecord, TrajectoryRecord

__all__ = ["Lineage", "OpenRollout", "trace_lineage"]


@dataclasses.dataclass(frozen=True)
class OpenRollout:
    rollout_id: str
    task_id: str
    level: int


@dataclasses.dataclass
class Lineage:
    trajectories: list[TrajectoryRecord]  # consumption by a void step cleared
    steps: list[StepRecord]  # the surviving lineage, one per version
    void_steps: int
    trained_in_lost_steps: int  # trajectories whose only training step was lost
    requested: list[str] | None  # every requested rollout id (None: a log without requests)
    open: list[OpenRollout]  # requested, no terminal record


def trace_lineage(records: Sequence[Any]) -> Lineage:
    """Read a run log (in order) as the surviving history; see the module docstring."""
    steps: list[StepRecord] = []
    trajectories: list[TrajectoryRecord] = []
    requests: dict[str, OpenRollout] = {}
    saw_request = False
    void = lost = 0
    for record in records:
        if isinstance(record, RequestRecord):
            saw_request = True
            for rollout_id in record.rollout_ids:
                requests[rollout_id] = OpenRollout(rollout_id, record.task_id, record.level)
        elif isinstance(record, StepRecord):
            steps.append(record)
        elif isinstance(record, TrajectoryRecord):
            trajectories.append(record)
        elif isinstance(record, ResumeRecord):
            kept = [s for s in steps if s.version <= record.version]
            void += len(steps) - len(kept)
            steps = kept
            for index, trajectory in enumerate(trajectories):
                consumed = trajectory.consumed_version
                if consumed is not None and consumed > record.version:
                    trajectories[index] = msgspec.structs.replace(
                        trajectory, consumed_version=None, learner_wait_s=None
                    )
                    lost += 1
    terminal = {t.rollout_id for t in trajectories}
    return Lineage(
        trajectories=trajectories,
        steps=steps,
        void_steps=void,
        trained_in_lost_steps=lost,
        requested=list(requests) if saw_request else None,
        open=[r for r in requests.values() if r.rollout_id not in terminal],
    )
