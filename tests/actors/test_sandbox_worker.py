"""A worker whose scheduler stopped before the episode ended drops the result, not itself."""

from __future__ import annotations

import anyio
import pytest

from actors.rollouts import RolloutRequest
from actors.sandbox_worker import Action, Assign, SandboxWorker
from runtime import ActorStoppedError, ActorSystem
from sandboxes._spec import ExecResult

pytestmark = pytest.mark.anyio


class StoppedScheduler:
    """Stands in for a scheduler the run has already stopped: its mailbox is closed."""

    def __init__(self) -> None:
        self.told: list[object] = []

    async def tell(self, message: object) -> None:
        self.told.append(message)
        raise ActorStoppedError("scheduler is stopped")


class PassingSandbox:
    async def exec(self, command: list[str], timeout: float | None = None) -> ExecResult:
        return ExecResult(exit_code=0)


class Lease:
    cold = False

    def __init__(self) -> None:
        self.released: list[bool] = []

    async def ready(self) -> PassingSandbox:
        return PassingSandbox()

    def release(self, *, healthy: bool) -> None:
        self.released.append(healthy)


class OneAction:
    async def act(self, request: RolloutRequest, step: int, last: ExecResult | None) -> Action:
        return Action(command=["true"])


async def test_a_result_for_a_stopped_scheduler_is_dropped_without_a_crash() -> None:
    scheduler = StoppedScheduler()
    async with ActorSystem(lag_interval=None) as system:
        worker = system.spawn(lambda: SandboxWorker(OneAction()), name="w0", mailbox_size=1)
        leases = [Lease(), Lease()]
        for i, lease in enumerate(leases):
            request = RolloutRequest(rollout_id=f"r{i}", task_id="t", max_steps=1)
            assign = Assign(
                request=request,
                attempt=0,
                lease=lease,
                deadline_at=anyio.current_time() + 30.0,
                reply_to=scheduler,
            )
            # The handler returns normally (a raise would fail this ask) and the worker,
            # not restarted, takes the next episode.
            assert await worker.ask(assign, timeout=10.0) is None
        assert [lease.released for lease in leases] == [[True], [True]]
        assert [done.outcome for done in scheduler.told] == ["passed", "passed"]  # type: ignore[attr-defined]
        assert system.statistics().restarts == 0
