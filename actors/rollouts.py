"""The vocabulary of a rollout's life, shared by the scheduler, workers and whoever listens.

Every rollout ends in exactly one `RolloutFinished` with status completed, failed (with a
reason) or cancelled, so that requested = completed + failed + cancelled + in flight holds.
"""

from __future__ import annotations

from typing import Literal

import msgspec

from runtime import Message

__all__ = ["RolloutFinished", "RolloutRequest", "Status", "StepTiming"]

Status = Literal["completed", "failed", "cancelled"]


class RolloutRequest(Message):
    """Ask for one episode of `task_id` in a sandbox of `runtime`.

    `deadline_s` counts from the request: past it the rollout is cancelled and its sandbox
    recycled. `sim_pass_step` is read only by the simulated generator (the step at which its
    action passes; None: never).
    """

    rollout_id: str
    task_id: str
    group: str = "default"
    runtime: str = "python"
    tenant: str = "default"
    priority: int = 0
    max_steps: int = 3
    deadline_s: float = 600.0
    sim_pass_step: int | None = None

    def __post_init__(self) -> None:
        if not self.rollout_id:
            raise ValueError("rollout_id must not be empty")
        if self.max_steps < 1:
            raise ValueError(f"max_steps must be >= 1, got {self.max_steps}")
        if not self.deadline_s > 0:
            raise ValueError(f"deadline_s must be > 0, got {self.deadline_s}")


class StepTiming(msgspec.Struct, frozen=True, array_like=True):
    """Seconds one turn spent generating the action and executing it."""

    generate_s: float
    exec_s: float


class RolloutFinished(Message):
    """The terminal record of a rollout. Times are on the run's clock."""

    rollout_id: str
    task_id: str
    group: str
    runtime: str
    tenant: str
    status: Status
    reason: str = ""
    passed: bool = False
    attempts: int = 1
    requested_at: float = 0.0
    started_at: float | None = None
    finished_at: float = 0.0
    queue_wait_s: float = 0.0
    acquire_s: float = 0.0
    cold_start: bool = False
    steps: list[StepTiming] = msgspec.field(default_factory=list)
