#!/usr/bin/env python3
"""bf16 autocast on the CPU: does the default model compute faster than in fp32?

python scripts/bench_cpu_bf16.py [--rounds N] [--seed S]

`TransformerPolicy` autocasts to bf16 on CUDA only. CPUs with AVX-512 BF16 or AMX run bf16
matrix products in hardware, so this measures whether the CPU should autocast too: the
learner's step on batches shaped like the default run's (`scripts/bench_learner.py`) and
generation of 16 of its prompts (a prompt pass and 64 new tokens each), in fp32 and under
`torch.autocast("cpu", dtype=torch.bfloat16)`, the arms alternating each round on the same
weights. Reports the median seconds per learner step, generated tokens per second and the
ratios bf16 / fp32 (docs/benchmarks.md).
"""

from __future__ import annotations

import argparse
import random
import statistics
import time

import torch
from bench_learner import (
    DEFAULT_MODEL,
    default_run_batch,
    default_run_core,
    default_run_prompts,
)
from rich.console import Console
from rich.table import Table

from actors._learner_core import LearnerCore, Trajectory
from policies.transformer import TransformerPolicy
from tasks.procedural import ProceduralTasks


class SwitchablePolicy(TransformerPolicy):
    """The default policy whose CPU autocast the benchmark turns on and off."""

    bf16 = False

    def _autocast(self) -> torch.autocast:
        if self.device.type == "cuda":
            return super()._autocast()
        return torch.autocast("cpu", dtype=torch.bfloat16, enabled=SwitchablePolicy.bf16)


def _tokens_per_s(policy: TransformerPolicy, prompts: list[list[int]]) -> float:
    started = time.perf_counter()
    decoding = policy.start(prompts, max_new_tokens=64, temperature=1.0, seed=0)
    tokens = 0
    while not decoding.done:
        tokens += policy.advance(decoding, 8)
    return tokens / (time.perf_counter() - started)


def _step_s(core: LearnerCore, batch: list[list[Trajectory]]) -> float:
    started = time.perf_counter()
    core.update(batch)
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    if args.rounds < 1:
        parser.error(f"--rounds: must be >= 1, got {args.rounds}")
    rng = random.Random(args.seed)
    policy = SwitchablePolicy(DEFAULT_MODEL, seed=0)
    tasks = ProceduralTasks(seed=0, max_level=3)
    enc = policy.tokenizer.encode
    prompts = default_run_prompts(rng, tasks, enc)
    batches = [default_run_batch(rng, tasks, enc) for _ in range(args.rounds)]
    core = default_run_core(SwitchablePolicy)
    arms = {"fp32": False, "bf16 autocast": True}
    for on in arms.values():  # warm-up: allocator, kernels, the first Adam step
        SwitchablePolicy.bf16 = on
        _step_s(core, batches[0])
        _tokens_per_s(policy, prompts)
    steps: dict[str, list[float]] = {name: [] for name in arms}
    speed: dict[str, list[float]] = {name: [] for name in arms}
    for r in range(args.rounds):
        order = list(arms) if r % 2 == 0 else list(reversed(arms))
        for name in order:  # each arm first in turn, so both see the same machine load
            SwitchablePolicy.bf16 = arms[name]
            steps[name].append(_step_s(core, batches[r]))
            speed[name].append(_tokens_per_s(policy, prompts))
    table = Table(title=f"default model on the CPU, {args.rounds} rounds per arm")
    for column in ("arm", "learner s/step (median)", "generated tokens/s (median)"):
        table.add_column(column)
    for name in arms:
        table.add_row(
            name, f"{statistics.median(steps[name]):.3f}", f"{statistics.median(speed[name]):.0f}"
        )
    console = Console()
    console.print(table)
    fp32, bf16 = list(arms)
    console.print(
        f"bf16 / fp32: learner steps/s "
        f"{statistics.median(steps[fp32]) / statistics.median(steps[bf16]):.2f}x, tokens/s "
        f"{statistics.median(speed[bf16]) / statistics.median(speed[fp32]):.2f}x"
    )


if __name__ == "__main__":
    main()
