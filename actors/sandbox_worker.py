"""`SandboxWorker`: runs one multi-turn episode on a leased sandbox, then reports.

observe → ask the action source for an action → execute it in the sandbox → feed the result
back, until the action passes (exit status 0) or the step limit. The whole episode runs under
the rollout's deadline; the worker always answers the scheduler with exactly one `WorkerDone`,
whatever happened, and always releases the lease (destroying the sandbox when it failed or an
exec was cut off by the deadline).
"""

from __future__ import annotations

from typing import Any, Literal, Protocol

import anyio
import msgspec

from actors.rollouts import RolloutRequest, StepTiming
from runtime import Actor, ActorRef, ActorStoppedError, Message, handler
from runtime.clock import now as clock_now
from sandboxes._errors import SandboxConfigError, SandboxInfraError
from sandboxes._spec import ExecResult

__all__ = [
    "Action",
    "ActionSource",
    "Assign",
    "Outcome",
    "SandboxWorker",
    "WorkerDone",
    "report_done",
]

Outcome = Literal["passed", "failed", "infra", "deadline", "error"]


class Action(msgspec.Struct, frozen=True):
    """What to run in the sandbox for one turn."""

    command: list[str]
    timeout: float | None = None


class ActionSource(Protocol):
    """Where actions come from: a simulated generator, or the model (the generator actor)."""

    async def act(self, request: RolloutRequest, step: int, last: ExecResult | None) -> Action: ...


class Assign(Message):
    """Run `request` (attempt number `attempt`) on `lease`, finishing by `deadline_at`, and
    report to `reply_to`, quoting `dispatch`: the scheduler numbers its assignments so that a
    late report (of one it has given up on) is never taken for a current one.

    `lease` is an in-process `sandboxes.pool.Lease`; this message is never serialized.
    """

    request: RolloutRequest
    attempt: int
    lease: Any
    deadline_at: float
    reply_to: ActorRef
    dispatch: int = 0


class WorkerDone(Message):
    """How the episode ended, with its timings; `worker` is who is free again."""

    rollout_id: str
    attempt: int
    outcome: Outcome
    reason: str = ""
    started_at: float = 0.0
    acquire_s: float = 0.0
    cold_start: bool = False
    steps: list[StepTiming] = msgspec.field(default_factory=list)
    worker: str = ""
    dispatch: int = 0  # the `Assign`'s


class SandboxWorker(Actor):
    """One episode at a time; spawn as many as the concurrency you want."""

    def __init__(self, actions: ActionSource) -> None:
        self.actions = actions

    @handler
    async def assign(self, msg: Assign) -> None:
        done = await self._episode(msg)
        await report_done(self, msg, done)

    async def _episode(self, msg: Assign) -> WorkerDone:
        lease = msg.lease
        started = clock_now()
        steps: list[StepTiming] = []
        outcome: Outcome = "failed"
        reason = ""
        acquire_s = 0.0
        healthy = True
        try:
            with anyio.move_on_after(max(0.0, msg.deadline_at - started)) as deadline:
                sandbox = await lease.ready()
                acquire_s = clock_now() - started
                last: ExecResult | None = None
                for step in range(msg.request.max_steps):
                    t0 = clock_now()
                    action = await self.actions.act(msg.request, step, last)
                    t1 = clock_now()
                    try:
                        last = await sandbox.exec(action.command, timeout=action.timeout)
                    except SandboxConfigError as exc:
                        # The action cannot be run as given (a NUL byte in an argument, an empty
                        # command, a bad timeout): the agent's failure, shown to it as a shell
                        # shows a command it cannot run.
                        last = ExecResult(
                            exit_code=126, stderr=f"roost: bad action: {exc}\n".encode()
                        )
                        reason = f"bad action: {exc}"
                    steps.append(StepTiming(t1 - t0, clock_now() - t1))
                    if last.infra_error is not None:
                        outcome, reason, healthy = "infra", last.infra_error.message, False
                        break
                    if last.exit_code == 0:
                        outcome, reason = "passed", ""
                        break
            if deadline.cancelled_caught:
                # An exec may still be running in there: the sandbox is recycled, not reused.
                outcome, reason, healthy = "deadline", "deadline passed", False
        except SandboxInfraError as exc:
            outcome, reason, healthy = "infra", str(exc), False
        except Exception as exc:  # a bug in an action source or backend: report, never vanish
            self.log.error("episode_error", rollout=msg.request.rollout_id, exc_info=exc)
            outcome, reason, healthy = "error", f"{type(exc).__name__}: {exc}", False
        except BaseException:
            # Cancelled (the phase ended, the run stopped): an exec may still be running in
            # the sandbox, so it is recycled, not reset for the next episode.
            healthy = False
            raise
        finally:
            lease.release(healthy=healthy)
        return WorkerDone(
            rollout_id=msg.request.rollout_id,
            attempt=msg.attempt,
            outcome=outcome,
            reason=reason,
            started_at=started,
            acquire_s=acquire_s,
            cold_start=lease.cold,
            steps=steps,
            worker=self.name,
            dispatch=msg.dispatch,
        )


async def report_done(worker: Actor, msg: Assign, done: WorkerDone) -> None:
    """Tell the scheduler how the episode ended. A scheduler that has already stopped (the run
    ended while this episode ran past its drain) is not this worker's fault: the run has
    recorded the rollout as cancelled, so the result is logged and dropped, not raised, which
    would count as a crash and restart the worker."""
    try:
        await msg.reply_to.tell(done)
    except ActorStoppedError:
        worker.log.info(
            "result_after_scheduler_stopped", rollout=done.rollout_id, outcome=done.outcome
        )
