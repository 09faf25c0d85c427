"""The virtual clock: an hour of simulated schedule in well under a second, deterministically."""

from __future__ import annotations

import random
import time

import anyio

from runtime import Actor, ActorRef, ActorSystem, Message, handler, run


class Job(Message):
    worker: int
    seq: int


class Done(Message):
    worker: int
    seq: int
    latency: float


class Worker(Actor):
    """Takes a simulated, seeded amount of time per job, then reports to the sink."""

    def __init__(self, index: int, sink: ActorRef, seed: int) -> None:
        self.index = index
        self.sink = sink
        self.rng = random.Random(seed * 1000 + index)

    @handler
    async def job(self, msg: Job) -> None:
        latency = self.rng.expovariate(1 / 15.0)  # mean 15 s of simulated work
        await anyio.sleep(latency)
        await self.sink.tell(Done(worker=self.index, seq=msg.seq, latency=latency))


class Sink(Actor):
    def __init__(self, trace: list[tuple[float, int, int]]) -> None:
        self.trace = trace

    @handler
    def done(self, msg: Done) -> None:
        self.trace.append((round(anyio.current_time(), 9), msg.worker, msg.seq))


async def _simulate_one_hour(seed: int) -> list[tuple[float, int, int]]:
    trace: list[tuple[float, int, int]] = []
    async with ActorSystem(lag_interval=None) as system:
        sink = system.spawn(lambda: Sink(trace), name="sink")
        workers = [
            system.spawn(lambda i=i: Worker(i, sink, seed), name=f"worker-{i}") for i in range(30)
        ]
        rng = random.Random(seed)
        seq = 0
        while anyio.current_time() < 3600.0:
            await anyio.sleep(rng.expovariate(1.0))  # about one job a second
            await workers[rng.randrange(len(workers))].tell(Job(worker=0, seq=seq))
            seq += 1
    return trace


def test_one_simulated_hour_runs_in_under_a_second_and_repeats_exactly() -> None:
    started = time.perf_counter()
    first = run(_simulate_one_hour, 7, virtual_clock=True)
    elapsed = time.perf_counter() - started
    second = run(_simulate_one_hour, 7, virtual_clock=True)
    other = run(_simulate_one_hour, 8, virtual_clock=True)
    assert len(first) > 3000  # about 3,600 jobs in the simulated hour
    assert max(t for t, _, _ in first) >= 3600.0
    assert elapsed < 1.0, f"an hour of simulation took {elapsed:.2f}s of wall time"
    assert first == second
    assert first != other
