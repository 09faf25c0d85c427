"""The scale bench's barrier opens a slice of episodes per loop turn, never all at once."""

from __future__ import annotations

import anyio
import pytest
from anyio import wait_all_tasks_blocked
from anyio.lowlevel import checkpoint

from roost.bench._scale_rounds import RELEASE_SLICE, _Round

pytestmark = pytest.mark.anyio

WAITERS = 3 * RELEASE_SLICE + 10  # four slices, the last one short


async def test_the_barrier_opens_one_slice_per_loop_turn() -> None:
    barrier = _Round(target=WAITERS)
    gates = [barrier.gate(index) for index in range(WAITERS)]
    log: list[str] = []

    async def episode(gate: anyio.Event) -> None:
        await gate.wait()
        log.append("e")

    async def bystander() -> None:
        while log.count("e") < WAITERS:
            log.append("b")
            await checkpoint()

    async with anyio.create_task_group() as group:
        for gate in gates:
            group.start_soon(episode, gate)
        await wait_all_tasks_blocked()
        group.start_soon(bystander)
        await barrier.open_gates()
    assert len(barrier.gates) == 4
    assert log.count("e") == WAITERS
    runs = [len(run) for run in "".join(log).split("b") if run]
    # Every episode is released, never more than a slice between two turns of the bystander.
    assert max(runs) <= RELEASE_SLICE
    assert len(runs) >= 4
