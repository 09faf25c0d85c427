"""A `SandboxWorker` that tells the staleness book an episode ended before the scheduler hears.

The order matters: the scheduler counts a rollout in flight until its `WorkerDone`, and the
book counts it as ended from here until the terminal record is settled, so admission never
sees a gap in which a finished rollout is counted nowhere (and over-admits).
"""

from __future__ import annotations

from actors.sandbox_worker import ActionSource, Assign, SandboxWorker, WorkerDone
from policies.staleness import StalenessBook

__all__ = ["TrackedWorker"]


class TrackedWorker(SandboxWorker):
    def __init__(self, actions: ActionSource, book: StalenessBook) -> None:
        super().__init__(actions)
        self.book = book

    async def _episode(self, msg: Assign) -> WorkerDone:
        try:
            return await super()._episode(msg)
        finally:
            self.book.ended(msg.request.rollout_id)
