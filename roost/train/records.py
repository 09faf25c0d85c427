"""What a training run writes to its append-only log (`trajectories.log`, msgpack frames).

Every rollout ends in exactly one `TrajectoryRecord`: scored (with its reward and turns),
failed (with the reason) or cancelled. Each carries its phase timings and the policy versions
of its tokens, so a profile can be rebuilt from the log alone:

- `queue_wait_s`: from the request to the start of the episode;
- `acquire_s`: waiting for the sandbox to be ready (a cold start, or none);
- per turn, `generate_s` (asking the generator, batching included) and `exec_s` (running the
  tests in the sandbox);
- `evaluate_s`: scoring on the host (reward, group bookkeeping);
- `learner_wait_s`: from the end of the episode until the optimizer step that consumed it
  (null when no step consumed it before the run ended), with `consumed_version`.

Every record is written when its rollout ends, a scored one with its reward and turns, so that
a process killed before the learner consumed it loses neither. The two consumption fields are
then filled in when the log is read (`roost.train.lineage.trace_lineage`): a `StepRecord`
names the rollouts its step consumed, and a `SettledRecord` gives the reason a scored group
was never trained on (equal rewards: no signal). Logs written before 2026-12-08 carry the two
fields in the record itself, written at the step; both read the same. `EvalRecord`s mark the
held-out evaluations.
"""

from __future__ import annotations

from typing import Literal

import msgspec

from runtime import Message

__all__ = [
    "EvalRecord",
    "RequestRecord",
    "ResumeRecord",
    "RunRecord",
    "SettledRecord",
    "StepRecord",
    "TrajectoryRecord",
    "TurnRecord",
]


class TurnRecord(msgspec.Struct, frozen=True, kw_only=True):
    """One model turn: its text, how it was judged, its token versions and its timings."""

    text: str
    passed: bool
    score: float
    reason: str = ""
    tokens: int = 0
    min_version: int = 0
    max_version: int = 0
    generate_s: float = 0.0
    exec_s: float = 0.0
    #: Judged by the verdict of an earlier run of the same program on the same tests
    #: (`episode.reuse_verdicts`), so `exec_s` is the wait for that run, if any.
    reused: bool = False
    #: A failed turn whose program passed the tests of another training task (a hindsight
    #: task, `episode.relabel`): that task's id; it also trained as that task's answer.
    solved: str = ""


class TrajectoryRecord(Message):
    rollout_id: str
    task_id: str
    level: int
    demo_level: bool
    status: Literal["scored", "failed", "cancelled"]
    reason: str = ""
    reward: float = 0.0
    passed: bool = False
    attempts: int = 1
    turns: list[TurnRecord] = msgspec.field(default_factory=list)
    requested_at: float = 0.0
    finished_at: float = 0.0
    queue_wait_s: float = 0.0
    acquire_s: float = 0.0
    generate_s: float = 0.0
    exec_s: float = 0.0
    evaluate_s: float = 0.0
    learner_wait_s: float | None = None
    consumed_version: int | None = None
    wall: float = 0.0  # Unix time of the terminal event
    scored_at: float | None = None  # the run's loop clock when scored, as `StepRecord.at`


class StepRecord(Message):
    """The learner reached `version` (the step consumed `samples` model turns)."""

    version: int
    samples: int
    reward_mean: float
    pass_rate: float
    wall: float
    elapsed_s: float  # seconds into the RL phase (across resumes)
    at: float = 0.0  # the run's loop clock, as the trajectory records' times
    rollout_ids: list[str] = msgspec.field(default_factory=list)


class SettledRecord(Message):
    """Scored rollouts that no step will train on, and why (the whole group: equal rewards,
    or a learner that crashed on it every time it was redelivered)."""

    rollout_ids: list[str]
    reason: str
    wall: float


class EvalRecord(Message):
    """A held-out evaluation: `stage` is after_sft, after_rl or sft_only_control."""

    stage: str
    version: int
    result: dict[str, dict[str, float]]
    tasks: int
    seconds: float
    wall: float


class RequestRecord(Message):
    """One GRPO group was requested: written before its requests reach the scheduler, so a
    run killed at any moment can tell which of its rollouts never reached a terminal record."""

    group_id: str
    task_id: str
    level: int
    rollout_ids: list[str]
    wall: float


class ResumeRecord(Message):
    """An RL segment started from the learner checkpoint of `version`. Steps above `version`
    logged before this record were lost with the process that made them (a kill): their
    weights never reached a checkpoint, so their samples count as not trained on."""

    segment: int
    version: int
    cancelled: int  # rollouts of earlier segments closed by this resume (in flight at the kill)
    wall: float


RunRecord = (
    TrajectoryRecord | StepRecord | EvalRecord | RequestRecord | ResumeRecord | SettledRecord
)
