#!/usr/bin/env python3
"""The learner's optimizer step: one pass, length-sorted micro-batches, and micro-batches
whose shared prompt stems run once.

python scripts/bench_learner.py [--repeats N] [--seed S]

Builds batches shaped like the default run's (32 episodes in 4 GRPO groups: first attempts
at the task's prompt, and revision turns whose prompts carry the last attempt and the first
failing test), then times `LearnerCore.update` on the same batches with the whole batch in
one pass, in micro-batches of `LearnerConfig.micro_batch_tokens`, and in those micro-batches
with `LearnerConfig.shared_stems` (each group's task prompt computed once), rotating
the arms so that all see the same machine load. Every arm packs its sequences into rows
(`pack_rows`; before 2026-12-05 the first two padded one row per sequence, and the stems'
rests one row each). Reports seconds per step and the ratios (docs/benchmarks.md).
"""

from __future__ import annotations

import argparse
import random
import statistics
import time
from collections.abc import Callable
from typing import Any

from rich.console import Console
from rich.table import Table

from actors._grpo import LossConfig
from actors._learner_core import LearnerConfig, LearnerCore, Trajectory
from policies.transformer import TransformerConfig, TransformerPolicy
from roost.train.task_source import revision_prompt
from tasks import Verdict
from tasks.procedural import ProceduralTasks

WRONG = "    return (x * 3) + 4\n"
DEFAULT_MODEL = TransformerConfig(d_model=192, n_layers=4, n_heads=4, max_len=512)  # the run's


def default_run_batch(
    rng: random.Random, tasks: ProceduralTasks, enc: Callable[..., list[int]]
) -> list[list[Trajectory]]:
    groups = []
    for g in range(4):
        task = tasks.task(rng.choice([1, 2, 3]), rng.randrange(10_000))
        group = []
        for m in range(8):
            # The default run's shape (runs of 2026-12-05): 1.8 turns an episode (mostly 1 or
            # 3), one-line attempts, completions of 23 tokens on average.
            turns = rng.choice([1, 1, 1, 3, 3])
            for turn in range(turns):
                prompt = task.prompt
                if turn:
                    verdict = Verdict(
                        passed=False,
                        score=0.0,
                        failure="agent",
                        reason=f"test_0: f(4) == 16, got {rng.randint(-99, 99)}",
                    )
                    prompt = revision_prompt(task, WRONG, verdict)
                completion = enc(WRONG * 3, bos=False)[: rng.randint(10, 36)]
                group.append(
                    Trajectory(
                        f"g{g}/{m}#{turn}",
                        enc(prompt),
                        completion,
                        [-0.5] * len(completion),
                        [0] * len(completion),
                        rng.random(),
                    )
                )
        groups.append(group)
    return groups


def default_run_prompts(
    rng: random.Random, tasks: ProceduralTasks, enc: Callable[..., list[int]], count: int = 16
) -> list[list[int]]:
    """`count` task prompts of levels 1-3, as one of the generator's chunks holds."""
    return [
        enc(tasks.task(rng.choice([1, 2, 3]), rng.randrange(10_000)).prompt) for _ in range(count)
    ]


def default_run_core(
    policy_type: type[TransformerPolicy] = TransformerPolicy, **learner: Any
) -> LearnerCore:
    """A learner on the default model with the default run's KL anchor (fresh weights);
    `learner` sets other `LearnerConfig` fields (the arms of a benchmark)."""
    return LearnerCore(
        policy_type(DEFAULT_MODEL, seed=0),
        LearnerConfig(loss=LossConfig(kl_coef=0.1), **learner),
        reference=policy_type(DEFAULT_MODEL, seed=0),
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    if args.repeats < 1:  # no batch to warm up on, no median to take
        parser.error(f"--repeats: must be >= 1, got {args.repeats}")
    rng = random.Random(args.seed)
    probe = TransformerPolicy(DEFAULT_MODEL, seed=0)
    tasks = ProceduralTasks(seed=0, max_level=3)
    batches = [default_run_batch(rng, tasks, probe.tokenizer.encode) for _ in range(args.repeats)]
    budget = LearnerConfig().micro_batch_tokens
    arms = {
        "one pass": (1 << 30, False),
        f"micro-batches of {budget} tokens": (budget, False),
        "micro-batches, shared stems": (budget, True),
    }
    cores = {
        name: default_run_core(micro_batch_tokens=tokens, shared_stems=share)
        for name, (tokens, share) in arms.items()
    }
    for core in cores.values():  # warm-up: allocator, first Adam step
        core.update(batches[0])
    seconds: dict[str, list[float]] = {name: [] for name in arms}
    names = list(cores)
    for k, batch in enumerate(batches):
        for name in names[k % 3 :] + names[: k % 3]:  # each arm first in turn
            core = cores[name]
            started = time.perf_counter()
            core.update(batch)
            seconds[name].append(time.perf_counter() - started)
    samples = statistics.mean(sum(len(g) for g in b) for b in batches)
    table = Table(title=f"learner step, {samples:.0f} samples a batch, {args.repeats} batches")
    table.add_column("arm")
    table.add_column("median s/step", justify="right")
    for name, values in seconds.items():
        table.add_row(name, f"{statistics.median(values):.2f}")
    console = Console()
    console.print(table)
    one, micro, stems = (statistics.median(v) for v in seconds.values())
    console.print(f"speed-up of micro-batches: {one / micro:.2f}x")
    console.print(f"speed-up of shared stems over micro-batches: {micro / stems:.2f}x")


if __name__ == "__main__":
    main()
