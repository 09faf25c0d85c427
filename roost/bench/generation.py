"""`roost bench generation`: the generator actor under 1,000 episodes against offline batching.

Same model, same device, same prompts, same batch size, alternating sides:

- offline: the prompts in batches of `max_batch`, each generated start to finish by
  `policies.neural.generate` in the calling thread - the best this model can do here;
- actor: `episodes` concurrent tasks (episodes) each ask the `Generator` actor for one
  completion per turn through a `GeneratorClient`; the actor batches them dynamically and runs
  the model in a worker thread, a chunk of decoding steps per call.

Figures are generated tokens per wall second; `actor_vs_offline_ratio` is the median over
repetitions of actor / offline measured back to back. Loop lag (how late a 100 ms sleep wakes
while the actor side runs) shows that the event loop stays free.
"""

from __future__ import annotations

import dataclasses
import random
import statistics
import time
from typing import Any

import anyio

from actors.generator import (
    Generator,
    GeneratorClient,
    GeneratorConfig,
    GeneratorStatistics,
    GetGeneratorStatistics,
)
from policies.neural import NeuralPolicy, generate
from policies.tokenizer import ByteTokenizer
from policies.transformer import TransformerConfig, TransformerPolicy
from roost.bench._report import machine
from runtime import ActorSystem
from runtime import run as run_loop


def _prompts(n: int, seed: int) -> list[list[int]]:
    rng = random.Random(seed)
    tok = ByteTokenizer()
    return [
        tok.encode(
            "rev:" + "".join(rng.choice("abcdefgh") for _ in range(rng.randint(4, 12))) + "="
        )
        for _ in range(n)
    ]


def offline_tokens_per_s(
    policy: TransformerPolicy, prompts: list[list[int]], max_batch: int, max_new_tokens: int
) -> float:
    started = time.perf_counter()
    tokens = 0
    for index in range(0, len(prompts), max_batch):
        samples = generate(
            policy, prompts[index : index + max_batch], max_new_tokens=max_new_tokens, seed=index
        )
        tokens += sum(len(s.tokens) for s in samples)
    return tokens / (time.perf_counter() - started)


@dataclasses.dataclass(frozen=True)
class EpisodeRun:
    """What `run_episodes` measured."""

    elapsed_s: float
    turns: int
    tokens: int
    turn_latency: dict[str, float]  # `Histogram.summary()` of ask-to-answer seconds per turn
    loop_lag: dict[str, float]  # the event loop's lag while the episodes ran
    stats: GeneratorStatistics


async def run_episodes(
    policy: NeuralPolicy,
    prompts: list[list[int]],
    turns: int,
    config: GeneratorConfig,
    between_turns_s: float = 0.0,
    *,
    spread: float = 0.0,
    seed: int = 0,
) -> EpisodeRun:
    """One concurrent episode per prompt, each asking the `Generator` actor for `turns`
    completions through a `GeneratorClient`, waiting `between_turns_s` after each (a
    stand-in for a sandbox's time, spent in other processes). With `spread` in [0, 1] each
    wait is drawn uniformly from `between_turns_s` * [1 - spread, 1 + spread] (seeded), so
    that the episodes drift apart as real tests' times make them."""
    if not 0.0 <= spread <= 1.0:
        raise ValueError(f"spread: must be in [0, 1], got {spread}")
    rng = random.Random(seed)
    tokens = 0
    async with ActorSystem(lag_interval=0.1) as system:
        generator = system.spawn(
            lambda: Generator(policy, config), name="generator", mailbox_size=len(prompts) * 2
        )
        client = GeneratorClient(generator, timeout_s=600.0)
        latency = system.metrics.histogram("bench.turn_latency_s")

        async def episode(prompt: list[int]) -> None:
            nonlocal tokens
            for _ in range(turns):
                asked = time.perf_counter()
                sample = await client.generate(prompt)
                latency.record(time.perf_counter() - asked)
                tokens += len(sample.tokens)
                if between_turns_s > 0:
                    await anyio.sleep(between_turns_s * (1 + spread * rng.uniform(-1, 1)))

        started = time.perf_counter()
        async with anyio.create_task_group() as group:
            for prompt in prompts:
                group.start_soon(episode, prompt)
        elapsed = time.perf_counter() - started
        stats = await generator.ask(GetGeneratorStatistics(), timeout=60.0)
        lag = system.metrics.histogram("loop_lag_s").summary()
    return EpisodeRun(elapsed, latency.count, tokens, latency.summary(), lag, stats)


async def actor_tokens_per_s(
    policy: TransformerPolicy, prompts: list[list[int]], turns: int, config: GeneratorConfig
) -> dict[str, float]:
    result = await run_episodes(policy, prompts, turns, config)
    return {
        "tokens_per_s": result.tokens / result.elapsed_s,
        "mean_occupancy": result.stats.mean_occupancy,
        "batches": float(result.stats.batches),
        "loop_lag_p99_s": result.loop_lag["p99"],
        "loop_lag_max_s": result.loop_lag["max"],
    }


def run(*, quick: bool = False, repeats: int | None = None) -> dict[str, Any]:
    """Run the suite; returns the result object that `--json` prints."""
    episodes = 1000
    turns = 1 if quick else 2
    max_new_tokens = 16 if quick else 32
    repeats = repeats or 3
    model = (
        TransformerConfig(d_model=128, n_layers=2, n_heads=4, max_len=128)
        if quick
        else TransformerConfig()
    )
    policy = TransformerPolicy(model, seed=0)
    policy.train(False)
    max_batch = 256
    config = GeneratorConfig(
        max_batch=max_batch, max_wait_s=0.01, max_new_tokens=max_new_tokens, chunk_tokens=8
    )
    prompts = _prompts(episodes, seed=0)
    offline: list[float] = []
    actor: list[dict[str, float]] = []
    # Warm-up of both sides (thread pool, allocator, first kernels), not measured.
    offline_tokens_per_s(policy, prompts[:max_batch], max_batch, 4)
    run_loop(actor_tokens_per_s, policy, prompts[:max_batch], 1, config)
    for _ in range(repeats):  # alternate the sides so drift on the machine hits both
        offline.append(offline_tokens_per_s(policy, prompts * turns, max_batch, max_new_tokens))
        actor.append(run_loop(actor_tokens_per_s, policy, prompts, turns, config))
    ratios = [a["tokens_per_s"] / o for a, o in zip(actor, offline, strict=True)]
    return {
        "suite": "generation",
        "machine": machine(),
        "device": str(policy.device),
        "model": f"{policy.num_parameters() / 1e6:.2f}M parameters",
        "episodes": episodes,
        "turns": turns,
        "max_new_tokens": max_new_tokens,
        "max_batch": max_batch,
        "repeats": repeats,
        "offline_tokens_per_s": statistics.median(offline),
        "actor_tokens_per_s": statistics.median(a["tokens_per_s"] for a in actor),
        "actor_mean_occupancy": statistics.median(a["mean_occupancy"] for a in actor),
        "loop_lag_p99_s": max(a["loop_lag_p99_s"] for a in actor),
        "loop_lag_max_s": max(a["loop_lag_max_s"] for a in actor),
        "actor_vs_offline_ratio": statistics.median(ratios),
        "ratios": ratios,
    }
