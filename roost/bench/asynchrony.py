"""`roost bench async`: trajectories/s with staleness bound k = 4 against k = 0, side by side.

The whole learning loop is real except the sandboxes: the scheduler admits rollouts through the
staleness book, workers ask the generator actor (one small transformer, batched, in a thread)
for a completion of a toy task, execute a simulated action whose duration is lognormal (heavy
tail), and the learner (a second copy of the same model, AdamW, GRPO with the decoupled
objective) steps on groups of samples and publishes each version back to the generator.

Both sides get the same model, the same seeds, the same workers and pool, and the same budget:
`steps` optimizer steps of `batch` samples. The figure is consumed trajectories per wall second;
`async_speedup` is the k = 4 figure over the k = 0 one (pairs alternate, median of the ratios).
"""

from __future__ import annotations

import statistics
import time
from typing import Any

import anyio

from actors._tracked_worker import TrackedWorker
from actors.generator import (
    Generator,
    GeneratorClient,
    GeneratorConfig,
    GetGeneratorStatistics,
    ModelActionSource,
)
from actors.learner import (
    GetLearnerStatistics,
    Learner,
    LearnerConfig,
    RolloutSettled,
    ScoredGroup,
    Trajectory,
)
from actors.rollouts import RolloutFinished, RolloutRequest
from actors.scheduler import GetStatistics, SandboxFreed, Scheduler, SchedulerConfig
from policies.scheduling import make_policy
from policies.staleness import StalenessBook
from policies.transformer import TransformerConfig, TransformerPolicy
from roost.bench._report import machine
from roost.bench._toy_task import ToyTasks
from runtime import Actor, ActorRef, ActorSystem, handler
from runtime import run as run_loop
from runtime.distributions import Distribution
from sandboxes._spec import SandboxSpec
from sandboxes.pool import SandboxPool
from sandboxes.sim_cluster import RuntimeProfile, SimCluster

MODEL = TransformerConfig(d_model=128, n_layers=2, n_heads=4, max_len=64)


class _Collector(Actor):
    """Scheduler sink: turns finished rollouts into scored GRPO groups for the learner."""

    def __init__(
        self,
        source: ModelActionSource,
        book: StalenessBook,
        learner: ActorRef,
        tasks: ToyTasks,
        group_size: int,
        rewards: list[float],
    ) -> None:
        self.source = source
        self.book = book
        self.learner = learner
        self.tasks = tasks
        self.group_size = group_size
        self.groups: dict[str, tuple[int, list[Trajectory]]] = {}
        self.rewards = rewards

    @handler
    async def finished(self, msg: RolloutFinished) -> None:
        turns = self.source.pop(msg.rollout_id)
        usable = msg.status == "completed" and bool(turns)
        seen, samples = self.groups.get(msg.task_id, (0, []))
        if usable:
            turn = turns[-1]
            reward = self.tasks.reward(msg.task_id, turn.text)
            self.rewards.append(reward)
            samples.append(
                Trajectory(
                    rollout_id=msg.rollout_id,
                    prompt=turn.prompt,
                    completion=turn.sample.tokens,
                    logprobs=turn.sample.logprobs,
                    versions=turn.sample.versions,
                    reward=reward,
                )
            )
        else:
            self.book.settled(msg.rollout_id, usable=False)
            await self.learner.tell(RolloutSettled(rollout_id=msg.rollout_id))
        seen += 1
        if seen < self.group_size:
            self.groups[msg.task_id] = (seen, samples)
            return
        del self.groups[msg.task_id]
        # Settled only now: a sample waiting for its group-mates still counts as running, so
        # the learner waits for the group rather than letting its first member go stale.
        for sample in samples:
            self.book.settled(sample.rollout_id, usable=True)
        if samples:
            await self.learner.tell(ScoredGroup(group_id=msg.task_id, trajectories=samples))


async def run_side(
    k: int,
    *,
    steps: int,
    group_size: int,
    groups_per_step: int,
    workers: int,
    exec_latency: Distribution,
    seed: int = 0,
) -> dict[str, Any]:
    """One side: the figures of `steps` learner steps at staleness bound `k`."""
    batch = group_size * groups_per_step
    book = StalenessBook(k, batch)
    tasks = ToyTasks(seed=seed)
    gen_policy = TransformerPolicy(MODEL, seed=seed)
    learn_policy = TransformerPolicy(MODEL, seed=seed)
    profile = RuntimeProfile(
        cold_start=Distribution.constant(0.0), exec=exec_latency, reset=Distribution.constant(0.0)
    )
    cluster = SimCluster({"python": profile}, seed=seed + 1)
    spec = SandboxSpec(backend="sim", runtime="python")
    done = anyio.Event()
    scheduler_box: list[ActorRef] = []

    finished_at: list[float] = []
    rewards: list[float] = []

    def published(version: int) -> None:
        scheduler_box[0].try_tell(SandboxFreed())  # the gate may have reopened: dispatch
        if version >= steps and not done.is_set():
            finished_at.append(time.perf_counter())
            book.close()  # measured: start nothing more while the system winds down
            done.set()

    async with (
        SandboxPool(lambda key: cluster.sandbox(spec), capacity=workers) as pool,
        ActorSystem(lag_interval=0.1, stop_timeout=1.0) as system,
    ):
        generator = system.spawn(
            lambda: Generator(
                gen_policy, GeneratorConfig(max_batch=64, max_wait_s=0.002, max_new_tokens=8)
            ),
            name="generator",
            mailbox_size=8192,
        )
        learner = system.spawn(
            lambda: Learner(
                learn_policy,
                LearnerConfig(batch_size=batch, k=k, lr=1e-3, correction="decoupled", seed=seed),
                book=book,
                generator=generator,
                on_published=published,
            ),
            name="learner",
            mailbox_size=8192,
        )
        source = ModelActionSource(
            GeneratorClient(generator), tasks.prompt_for, tasks.action_for, book=book
        )
        collector = system.spawn(
            lambda: _Collector(source, book, learner, tasks, group_size, rewards),
            name="collector",
            mailbox_size=8192,
        )
        refs = [
            system.spawn(lambda: TrackedWorker(source, book), name=f"worker-{i}", mailbox_size=1)
            for i in range(workers)
        ]
        scheduler = system.spawn(
            lambda: Scheduler(
                pool=pool,
                workers=refs,
                sink=collector,
                policy=make_policy("fifo"),
                config=SchedulerConfig(seed=seed),
                gate=book,
            ),
            name="scheduler",
            mailbox_size=65536,
        )
        scheduler_box.append(scheduler)
        started = time.perf_counter()
        # Enough requests that the queue never runs dry; the gate decides what starts.
        for index in range((steps + k + 2) * groups_per_step):
            for member in range(group_size):
                await scheduler.tell(
                    RolloutRequest(
                        rollout_id=f"t{index}/{member}", task_id=f"t{index}", max_steps=1
                    )
                )
        with anyio.fail_after(3600):
            await done.wait()
        wall = finished_at[0] - started
        await _drain(scheduler)
        stats = await learner.ask(GetLearnerStatistics(), timeout=60)
        gen_stats = await generator.ask(GetGeneratorStatistics(), timeout=60)
        lag = system.metrics.histogram("loop_lag_s").summary()
        system_snapshot = {"loop_lag_p99_s": lag["p99"], "loop_lag_max_s": lag["max"]}
    return {
        "k": k,
        "trajectories": steps * batch,
        "wall_s": wall,
        "trajectories_per_s": steps * batch / wall,
        "reward_mean": sum(rewards) / len(rewards) if rewards else 0.0,
        "staleness_histogram": {str(a): n for a, n in stats.staleness.items()},
        "max_staleness": stats.max_staleness,
        "dropped_stale": stats.dropped_stale,
        "learner_idle_fraction": stats.idle_fraction,
        "generator_mean_occupancy": gen_stats.mean_occupancy,
        "generator_tokens_per_s": gen_stats.tokens / wall,
        "weight_switches_mid_batch": gen_stats.switches_mid_batch,
        **system_snapshot,
    }


async def _drain(scheduler: ActorRef) -> None:
    """Let the running episodes finish (admission is closed) so the system stops cleanly."""
    with anyio.fail_after(120):
        # Polling, after the measurement: the scheduler's books are the only complete view of
        # what is still running, and the interval plays no part in any figure.
        while (await scheduler.ask(GetStatistics(), timeout=60)).in_flight:  # noqa: ASYNC110
            await anyio.sleep(0.2)


def run(*, quick: bool = False, repeats: int | None = None) -> dict[str, Any]:
    """Run the suite; returns the result object that `--json` prints."""
    repeats = repeats or 1
    options: dict[str, Any] = {
        "steps": 6 if quick else 20,
        "group_size": 4,
        "groups_per_step": 4 if quick else 8,
        "workers": 64,
        "exec_latency": Distribution(
            dist="lognormal", median=0.1 if quick else 0.4, sigma=1.0, cap=20.0
        ),
    }
    pairs: list[tuple[dict[str, Any], dict[str, Any]]] = []
    for rep in range(repeats):
        sync = run_loop(_side, 0, options, rep)
        asyn = run_loop(_side, 4, options, rep)
        pairs.append((sync, asyn))
    ratios = [a["trajectories_per_s"] / s["trajectories_per_s"] for s, a in pairs]
    sync, asyn = pairs[-1]
    exec_latency: Distribution = options["exec_latency"]
    return {
        "suite": "async",
        "machine": machine(),
        "model": f"{TransformerPolicy(MODEL).num_parameters() / 1e6:.2f}M parameters",
        "repeats": repeats,
        "steps": options["steps"],
        "batch": options["group_size"] * options["groups_per_step"],
        "group_size": options["group_size"],
        "workers": options["workers"],
        "exec_latency": {
            "dist": "lognormal",
            "median": exec_latency.median,
            "sigma": exec_latency.sigma,
        },
        "k0": sync,
        "k4": asyn,
        "async_speedup": statistics.median(ratios),
        "speedups": ratios,
    }


async def _side(k: int, options: dict[str, Any], rep: int) -> dict[str, Any]:
    return await run_side(k, seed=rep, **options)
