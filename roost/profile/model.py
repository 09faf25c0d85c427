"""What a profile is made of: one timing row per rollout, and one row per learner step.

These rows are the contract between whatever ran (a training run, a stress run) and the
analysis; a run directory stores them as JSON lines (`rollouts.jsonl`, `learner_steps.jsonl`)
or, for a training run, inside its trajectory log.
"""

from __future__ import annotations

import msgspec

from actors.rollouts import RolloutFinished

__all__ = ["PHASES", "LearnerStep", "RolloutTiming", "timing_from_finished"]

#: The phases of a rollout's life, in the order they happen.
PHASES: tuple[str, ...] = (
    "queue_wait",
    "acquire",
    "generate",
    "exec",
    "evaluate",
    "learner_wait",
)


class RolloutTiming(msgspec.Struct, frozen=True, kw_only=True):
    """Seconds one rollout spent in each phase, and when it was requested and finished.

    `learner_wait_s` is the time between being scored and being consumed by a training step
    (zero for runs without a learner). Times are on the run's clock.
    """

    rollout_id: str
    status: str = "completed"
    requested_at: float = 0.0
    finished_at: float = 0.0
    queue_wait_s: float = 0.0
    acquire_s: float = 0.0
    generate_s: float = 0.0
    exec_s: float = 0.0
    evaluate_s: float = 0.0
    learner_wait_s: float = 0.0

    def __post_init__(self) -> None:
        for phase in PHASES:
            value = getattr(self, f"{phase}_s")
            if not value >= 0.0:  # also refuses NaN
                raise ValueError(f"{phase}_s must be a non-negative number, got {value!r}")
        if self.finished_at < self.requested_at:
            raise ValueError(
                f"finished_at ({self.finished_at}) is before requested_at ({self.requested_at})"
            )

    def phase_seconds(self) -> dict[str, float]:
        return {phase: getattr(self, f"{phase}_s") for phase in PHASES}


class LearnerStep(msgspec.Struct, frozen=True, kw_only=True):
    """One optimizer step: when the learner began waiting for its batch, when the batch was
    complete, when the step finished, and the rollouts it consumed."""

    version: int
    wait_started_at: float
    batch_ready_at: float
    finished_at: float
    rollout_ids: list[str] = msgspec.field(default_factory=list)

    def __post_init__(self) -> None:
        if not self.wait_started_at <= self.batch_ready_at <= self.finished_at:
            raise ValueError(
                f"learner step {self.version}: times out of order (wait_started_at "
                f"{self.wait_started_at}, batch_ready_at {self.batch_ready_at}, "
                f"finished_at {self.finished_at})"
            )


def timing_from_finished(record: RolloutFinished) -> RolloutTiming:
    """The timing row of a scheduler's terminal record (no evaluation or learner phases)."""
    return RolloutTiming(
        rollout_id=record.rollout_id,
        status=record.status,
        requested_at=record.requested_at,
        finished_at=max(record.finished_at, record.requested_at),
        queue_wait_s=max(0.0, record.queue_wait_s),
        acquire_s=max(0.0, record.acquire_s),
        generate_s=sum(max(0.0, step.generate_s) for step in record.steps),
        exec_s=sum(max(0.0, step.exec_s) for step in record.steps),
    )
