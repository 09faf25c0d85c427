"""`roost bench runtime`: actor messaging against raw asyncio, side by side in one run.

Two comparisons, each repeated, alternating the two sides so that noise on this shared machine
hits both alike:

- pipeline: a producer actor tells N small messages to a consumer actor (mailbox 1024), against
  a producer task putting the same messages into an `asyncio.Queue(1024)` read by a consumer task.
- ask: N sequential `ask` round trips to an actor, against N `asyncio.Future` ping-pongs through
  an `asyncio.Queue` to a task that resolves them.

Each ratio is the median, over the repetitions, of ours divided by the baseline measured just
before it. With Ray installed (`pip install 'roost[ray]'`), pipelined Ray actor calls are
measured too.
"""

from __future__ import annotations

import asyncio
import statistics
import time
from typing import Any

import anyio

from roost.bench._report import machine
from runtime import Actor, ActorRef, ActorSystem, Message, handler
from runtime import run as run_loop
from runtime.runner import uvloop_available

PIPELINE_MESSAGES = 1_000_000
ASK_ROUND_TRIPS = 100_000
MAILBOX = 1024


class Item(Message):
    n: int


class Produce(Message):
    count: int


class Ping(Message):
    pass


class _Consumer(Actor):
    def __init__(self, expected: int, done: anyio.Event) -> None:
        self.seen = 0
        self.expected = expected
        self.done = done

    @handler
    def item(self, msg: Item) -> None:
        self.seen += 1
        if self.seen == self.expected:
            self.done.set()


class _Producer(Actor):
    def __init__(self, consumer: ActorRef) -> None:
        self.consumer = consumer

    @handler
    async def produce(self, msg: Produce) -> None:
        item = Item(n=0)
        tell = self.consumer.tell
        for _ in range(msg.count):
            await tell(item)


class _Ponger(Actor):
    @handler
    def ping(self, msg: Ping) -> int:
        return 1


async def actor_pipeline(n: int) -> float:
    done = anyio.Event()
    async with ActorSystem(lag_interval=None) as system:
        consumer = system.spawn(lambda: _Consumer(n, done), name="consumer", mailbox_size=MAILBOX)
        producer = system.spawn(lambda: _Producer(consumer), name="producer")
        started = time.perf_counter()
        await producer.tell(Produce(count=n))
        await done.wait()
        elapsed = time.perf_counter() - started
    return n / elapsed


async def queue_pipeline(n: int) -> float:
    queue: asyncio.Queue[Item | None] = asyncio.Queue(MAILBOX)
    item = Item(n=0)

    async def consume() -> None:
        while await queue.get() is not None:
            pass

    consumer = asyncio.create_task(consume())
    started = time.perf_counter()
    for _ in range(n):
        await queue.put(item)
    await queue.put(None)
    await consumer
    return n / (time.perf_counter() - started)


async def actor_ask(n: int) -> float:
    async with ActorSystem(lag_interval=None) as system:
        ponger = system.spawn(_Ponger, name="ponger")
        ping = Ping()
        started = time.perf_counter()
        for _ in range(n):
            await ponger.ask(ping, timeout=5.0)
        elapsed = time.perf_counter() - started
    return n / elapsed


async def future_pingpong(n: int) -> float:
    loop = asyncio.get_running_loop()
    queue: asyncio.Queue[asyncio.Future[int] | None] = asyncio.Queue()

    async def pong() -> None:
        while (future := await queue.get()) is not None:
            future.set_result(1)

    ponger = asyncio.create_task(pong())
    started = time.perf_counter()
    for _ in range(n):
        future: asyncio.Future[int] = loop.create_future()
        queue.put_nowait(future)
        await future
    elapsed = time.perf_counter() - started
    queue.put_nowait(None)
    await ponger
    return n / elapsed


def ray_calls_per_s(n: int) -> float | None:
    """Pipelined calls to a Ray actor (all submitted, then gathered); None without Ray."""
    try:
        import ray
    except ImportError:
        return None

    @ray.remote
    class Ponger:
        def ping(self) -> int:
            return 1

    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        ponger = Ponger.remote()  # type: ignore[attr-defined]
        ray.get(ponger.ping.remote())
        started = time.perf_counter()
        ray.get([ponger.ping.remote() for _ in range(n)])
        return n / (time.perf_counter() - started)
    finally:
        ray.shutdown()


async def _measure(pipeline_n: int, ask_n: int, repeats: int) -> dict[str, Any]:
    pipeline_actor: list[float] = []
    pipeline_queue: list[float] = []
    ask_actor: list[float] = []
    ask_future: list[float] = []
    for _ in range(repeats):  # alternate the sides so drift on the machine hits both
        pipeline_queue.append(await queue_pipeline(pipeline_n))
        pipeline_actor.append(await actor_pipeline(pipeline_n))
        ask_future.append(await future_pingpong(ask_n))
        ask_actor.append(await actor_ask(ask_n))
    return {
        "pipeline_actor": pipeline_actor,
        "pipeline_queue": pipeline_queue,
        "ask_actor": ask_actor,
        "ask_future": ask_future,
    }


def _paired_ratio(ours: list[float], baseline: list[float]) -> float:
    # Each repetition runs both sides back to back, so the ratio within a pair sees the same
    # machine load; the median of those ratios is steadier than a ratio of medians.
    return statistics.median(a / b for a, b in zip(ours, baseline, strict=True))


def run(*, quick: bool = False, repeats: int | None = None) -> dict[str, Any]:
    """Run the suite; returns the result object that `--json` prints."""
    pipeline_n = PIPELINE_MESSAGES // (20 if quick else 1)
    ask_n = ASK_ROUND_TRIPS // (20 if quick else 1)
    repeats = repeats or (3 if quick else 5)
    samples = run_loop(_measure, pipeline_n, ask_n, repeats)
    median = {key: statistics.median(values) for key, values in samples.items()}
    result: dict[str, Any] = {
        "suite": "runtime",
        "machine": machine(),
        "event_loop": "uvloop" if uvloop_available() else "asyncio",
        "repeats": repeats,
        "pipeline_messages": pipeline_n,
        "ask_round_trips": ask_n,
        "actor_pipeline_msgs_per_s": median["pipeline_actor"],
        "queue_pipeline_msgs_per_s": median["pipeline_queue"],
        "pipeline_ratio": _paired_ratio(samples["pipeline_actor"], samples["pipeline_queue"]),
        "actor_ask_per_s": median["ask_actor"],
        "future_pingpong_per_s": median["ask_future"],
        "ask_ratio": _paired_ratio(samples["ask_actor"], samples["ask_future"]),
        "samples": samples,
    }
    ray_rate = ray_calls_per_s(min(ask_n, 20_000))
    result["ray_actor_calls_per_s"] = ray_rate
    if ray_rate is not None:
        result["ask_vs_ray_ratio"] = median["ask_actor"] / ray_rate
    return result
