"""What a run log means after crashes: which steps survive, which rollouts are still open.

A run killed at any moment (`kill -9`, a power loss) leaves a log that is whole up to its last
complete record, and checkpoints that are whole (written atomically). Two things then need
working out, here, from the log alone:

- **Open rollouts.** Every requested group is logged (`RequestRecord`) before its requests
  reach the scheduler, and every rollout's terminal record when it ends, so the rollouts
  requested but without a terminal record are exactly the ones in flight when the process
  died (in a log from before 2026-12-08, also those scored and waiting for the learner). A
  resume closes each with a `cancelled` record, so the books balance and none is forgotten.
- **Consumption.** A scored record is written before any step consumes it; the `StepRecord`
  of the step names its rollouts, and a `SettledRecord` the ones never to be trained on. Read
  here, they fill in each record's `consumed_version`, `learner_wait_s` and reason.
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

from roost.train.records import (
    RequestRecord,
    ResumeRecord,
    SettledRecord,
    StepRecord,
    TrajectoryRecord,
)

__all__ = ["Lineage", "OpenRollout", "trace_lineage"]


@dataclasses.dataclass(frozen=True)
class OpenRollout:
    rollout_id: str
    task_id: str
    level: int


@dataclasses.dataclass
class Lineage:
    trajectories: list[TrajectoryRecord]  # consumption joined in; by a void step, cleared
    steps: list[StepRecord]  # the surviving lineage, one per version
    void_steps: int
    trained_in_lost_steps: int  # trajectories whose only training step was lost
    requested: list[str] | None  # every requested rollout id (None: a log without requests)
    open: list[OpenRollout]  # requested, no terminal record


def trace_lineage(records: Sequence[Any]) -> Lineage:
    """Read a run log (in order) as the surviving history; see the module docstring."""
    steps: list[StepRecord] = []
    trajectories: list[TrajectoryRecord] = []
    where: dict[str, int] = {}  # rollout id -> its (first) record's index in `trajectories`
    requests: dict[str, OpenRollout] = {}
    saw_request = False
    void = lost = 0

    def join(rollout_id: str, **fields: Any) -> None:
        index = where.get(rollout_id)
        if index is not None and trajectories[index].status == "scored":
            trajectories[index] = msgspec.structs.replace(trajectories[index], **fields)

    for record in records:
        if isinstance(record, RequestRecord):
            saw_request = True
            for rollout_id in record.rollout_ids:
                requests[rollout_id] = OpenRollout(rollout_id, record.task_id, record.level)
        elif isinstance(record, StepRecord):
            steps.append(record)
            for rollout_id in record.rollout_ids:
                index = where.get(rollout_id)
                if index is None or trajectories[index].consumed_version is not None:
                    continue  # an older log wrote the record after its step, complete
                scored_at = trajectories[index].scored_at
                wait = record.at - scored_at if scored_at is not None and record.at else None
                join(rollout_id, consumed_version=record.version, learner_wait_s=wait)
        elif isinstance(record, SettledRecord):
            for rollout_id in record.rollout_ids:
                join(rollout_id, reason=record.reason)
        elif isinstance(record, TrajectoryRecord):
            where.setdefault(record.rollout_id, len(trajectories))
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
