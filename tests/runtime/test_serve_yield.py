"""A busy actor yields the loop after a couple of milliseconds of handlers, not only every 256."""

from __future__ import annotations

import time

import anyio
import pytest
from anyio.lowlevel import checkpoint

from runtime import Actor, ActorSystem, Message, handler

pytestmark = pytest.mark.anyio

SPIN_S = 0.0003  # CPU work per message: 64 of them hold the loop for about 19 ms unyielded
MESSAGES = 64


class Work(Message):
    index: int


class Spinner(Actor):
    def __init__(self, log: list[str], done: anyio.Event) -> None:
        self.journal = log
        self.done = done

    @handler
    def work(self, msg: Work) -> None:
        until = time.perf_counter() + SPIN_S
        while time.perf_counter() < until:
            pass
        self.journal.append("work")
        if msg.index == MESSAGES - 1:
            self.done.set()


async def test_a_long_run_of_handlers_lets_other_tasks_in() -> None:
    log: list[str] = []
    done = anyio.Event()

    async def bystander() -> None:
        while not done.is_set():
            log.append("tick")
            await checkpoint()

    async with ActorSystem() as system, anyio.create_task_group() as group:
        spinner = system.spawn(lambda: Spinner(log, done), name="spinner", mailbox_size=MESSAGES)
        for index in range(MESSAGES):
            assert spinner.try_tell(Work(index=index))
        group.start_soon(bystander)
        await done.wait()
    longest_run = max(len(run) for run in "".join(w[0] for w in log).split("t"))
    # Fewer than all 64 back to back (the count limit alone would hold the loop for all of
    # them), and more than a handful (the time check runs on one call in sixteen).
    assert 16 <= longest_run < MESSAGES
    assert log.count("work") == MESSAGES
