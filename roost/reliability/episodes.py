"""Real episodes without a model: the scheduler, sandbox workers and a warm pool, fed scripted
actions, with every terminal record delivered to the caller.

    async with EpisodeDriver(pool, ScriptedActions(...), workers=16) as driver:
        await driver.submit(RolloutRequest(rollout_id="r1", task_id="t"))
        record = await driver.next_finished(timeout=60)

This is the same path a training run takes (`Scheduler` → `SandboxWorker` → `SandboxPool`); only
the action source is a script instead of the generator, so the soak and the attack tests need no
model and no training.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from types import TracebackType
from typing import Self

import anyio
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from actors.rollouts import RolloutFinished, RolloutRequest
from actors.sandbox_worker import Action, SandboxWorker
from actors.scheduler import GetStatistics, Scheduler, SchedulerConfig, SchedulerStatistics
from policies.scheduling import make_policy
from runtime import Actor, ActorRef, ActorSystem, handler
from sandboxes._spec import ExecResult
from sandboxes.pool import SandboxPool

__all__ = ["EpisodeDriver", "ScriptedActions"]

ActionScript = Callable[[RolloutRequest, int, ExecResult | None], Action]


class ScriptedActions:
    """An action source that plays a script: by task id, a list of actions (one per step), or a
    function of (request, step, last result). A step past the end of a list repeats its last."""

    def __init__(
        self,
        scripts: Mapping[str, Sequence[Action]] | None = None,
        *,
        default: ActionScript | None = None,
    ) -> None:
        self.scripts = dict(scripts or {})
        self.default = default

    async def act(self, request: RolloutRequest, step: int, last: ExecResult | None) -> Action:
        script = self.scripts.get(request.task_id)
        if script:
            return script[min(step, len(script) - 1)]
        if self.default is None:
            raise KeyError(f"no script for task {request.task_id!r}")
        return self.default(request, step, last)


class _Sink(Actor):
    def __init__(self, out: MemoryObjectSendStream[RolloutFinished]) -> None:
        self.out = out

    @handler
    def finished(self, msg: RolloutFinished) -> None:
        self.out.send_nowait(msg)  # unbounded: the sink never holds the scheduler back


class EpisodeDriver:
    """An actor system with one scheduler, `workers` sandbox workers and a sink, over `pool`
    (which the caller owns and has entered)."""

    def __init__(
        self,
        pool: SandboxPool,
        actions: ScriptedActions,
        *,
        workers: int,
        config: SchedulerConfig | None = None,
        policy: str = "fifo",
    ) -> None:
        self.pool = pool
        self.actions = actions
        self.workers = workers
        self.config = config or SchedulerConfig(max_retries=1, backoff_s=0.05)
        self.policy = policy
        self._system = ActorSystem(lag_interval=None, stop_timeout=60.0)
        self._scheduler: ActorRef | None = None
        send, receive = anyio.create_memory_object_stream[RolloutFinished](math.inf)
        self._send: MemoryObjectSendStream[RolloutFinished] = send
        self._receive: MemoryObjectReceiveStream[RolloutFinished] = receive

    async def __aenter__(self) -> Self:
        system = await self._system.__aenter__()
        sink = system.spawn(lambda: _Sink(self._send), name="sink", mailbox_size=65536)
        refs = [
            system.spawn(lambda: SandboxWorker(self.actions), name=f"worker-{i}", mailbox_size=1)
            for i in range(self.workers)
        ]
        self._scheduler = system.spawn(
            lambda: Scheduler(
                pool=self.pool,
                workers=refs,
                sink=sink,
                policy=make_policy(self.policy),
                config=self.config,
            ),
            name="scheduler",
            mailbox_size=65536,
        )
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> bool | None:
        try:
            return await self._system.__aexit__(exc_type, exc, tb)
        finally:
            self._send.close()
            self._receive.close()

    async def submit(self, request: RolloutRequest) -> None:
        assert self._scheduler is not None, "use `async with`"
        await self._scheduler.tell(request)

    async def next_finished(self, *, timeout: float) -> RolloutFinished:
        """The next terminal record. :raises TimeoutError: none within `timeout` seconds."""
        with anyio.fail_after(timeout):
            return await self._receive.receive()

    async def statistics(self, *, timeout: float = 10.0) -> SchedulerStatistics:
        assert self._scheduler is not None, "use `async with`"
        stats: SchedulerStatistics = await self._scheduler.ask(GetStatistics(), timeout=timeout)
        return stats
