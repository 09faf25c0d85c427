#!/usr/bin/env python3
"""The RL phase's two models computing at once: torch's default threads against a share each.

python scripts/bench_threads.py [--seconds S] [--rounds N] [--seed S]

During RL the generator's model calls and the learner's steps run at the same time, each in
its own worker thread. This runs that pair for `--seconds` per arm: one thread decodes batches
of the default run's prompts (16 prompts, a prompt pass and 64 new tokens each, as the
generator's chunks do), the other steps a `LearnerCore` on batches shaped like the default
run's (`scripts/bench_learner.py`). Arm "default": both at torch's default intra-op threads
(one per core each); arm "shared": each at `roost.train.rl.rl_threads(0)` (half the cores
each). The arms alternate over `--rounds`; the figures are generated tokens per second and
learner steps per second of each arm, and the ratios shared / default of their medians
(docs/benchmarks.md).
"""

from __future__ import annotations

import argparse
import dataclasses
import random
import statistics
import threading
import time

from bench_learner import (
    DEFAULT_MODEL,
    default_run_batch,
    default_run_core,
    default_run_prompts,
)
from rich.console import Console
from rich.table import Table

from actors._learner_core import LearnerCore, Trajectory
from policies.neural import DEFAULT_THREADS, use_threads
from policies.transformer import TransformerPolicy
from roost.train.rl import rl_threads
from tasks.procedural import ProceduralTasks


def _generate_for(
    policy: TransformerPolicy, prompts: list[list[int]], threads: int, until: float
) -> int:
    use_threads(threads)
    tokens = 0
    while time.perf_counter() < until:
        decoding = policy.start(prompts, max_new_tokens=64, temperature=1.0)
        while not decoding.done:
            tokens += policy.advance(decoding, 8)
    return tokens


def _learn_for(
    core: LearnerCore, batches: list[list[list[Trajectory]]], threads: int, until: float
) -> int:
    core.config = dataclasses.replace(core.config, threads=threads)
    steps = 0
    while time.perf_counter() < until:
        core.update(batches[steps % len(batches)])
        steps += 1
    return steps


def _round(
    threads: int,
    seconds: float,
    policy: TransformerPolicy,
    prompts: list[list[int]],
    core: LearnerCore,
    batches: list[list[list[Trajectory]]],
) -> tuple[float, float]:
    until = time.perf_counter() + seconds
    out: dict[str, int] = {}
    gen = threading.Thread(
        target=lambda: out.__setitem__("tokens", _generate_for(policy, prompts, threads, until))
    )
    learn = threading.Thread(
        target=lambda: out.__setitem__("steps", _learn_for(core, batches, threads, until))
    )
    started = time.perf_counter()
    gen.start()
    learn.start()
    gen.join()
    learn.join()
    elapsed = time.perf_counter() - started
    return out["tokens"] / elapsed, out["steps"] / elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    if args.rounds < 1 or args.seconds <= 0:
        parser.error(
            f"--rounds must be >= 1 and --seconds > 0, got {args.rounds} and {args.seconds}"
        )
    rng = random.Random(args.seed)
    policy = TransformerPolicy(DEFAULT_MODEL, seed=0)
    tasks = ProceduralTasks(seed=0, max_level=3)
    enc = policy.tokenizer.encode
    prompts = default_run_prompts(rng, tasks, enc)
    batches = [default_run_batch(rng, tasks, enc) for _ in range(4)]
    core = default_run_core()
    arms = {"default": 0, "shared": rl_threads(0)}
    _round(0, 5.0, policy, prompts, core, batches)  # warm-up
    figures: dict[str, list[tuple[float, float]]] = {name: [] for name in arms}
    for r in range(args.rounds):
        order = list(arms) if r % 2 == 0 else list(reversed(arms))
        for name in order:
            figures[name].append(_round(arms[name], args.seconds, policy, prompts, core, batches))
    table = Table(
        title=f"generator and learner at once, {args.rounds} x {args.seconds:.0f} s per arm "
        f"(torch default: {DEFAULT_THREADS} threads)"
    )
    for column in ("arm", "threads each", "tokens/s (rounds)", "learner steps/s (rounds)"):
        table.add_column(column)
    for name, rows in figures.items():
        each = arms[name] or DEFAULT_THREADS
        table.add_row(
            name,
            str(each),
            ", ".join(f"{t:.0f}" for t, _ in rows),
            ", ".join(f"{s:.3f}" for _, s in rows),
        )
    console = Console()
    console.print(table)
    tokens = {n: statistics.median(t for t, _ in rows) for n, rows in figures.items()}
    steps = {n: statistics.median(s for _, s in rows) for n, rows in figures.items()}
    console.print(
        f"shared / default: tokens/s {tokens['shared'] / tokens['default']:.2f}x, "
        f"learner steps/s {steps['shared'] / steps['default']:.2f}x"
    )


if __name__ == "__main__":
    main()
