#!/usr/bin/env python3
"""bf16 on the CPU: does the default model compute faster than in fp32, and in which form?

python scripts/bench_cpu_bf16.py [--rounds N] [--seed S] [--threads T]

`TransformerPolicy` autocasts to bf16 on CUDA only. CPUs with AVX-512 BF16 or AMX run bf16
matrix products in hardware, so this measures three ways to use them against fp32, the arms
alternating each round on the same weights:

- generation of 16 of the default run's prompts and of 96 (a prompt pass and up to 64 new
  tokens each): fp32; under `torch.autocast("cpu", dtype=torch.bfloat16)`; and with the
  weights themselves stored in bf16 (`TransformerPolicy(dtype=torch.bfloat16)`, what
  `model.inference_dtype` gives the RL generator), which needs no cast around each product;
- the learner's step on batches shaped like the default run's (`scripts/bench_learner.py`),
  with its KL reference: fp32; under autocast; and fp32 with the reference's weights in bf16
  (its pass has no gradient, so it can be in bf16 alone).

Reports the medians (seconds per learner step, generated tokens per second) and the ratios to
fp32 (docs/benchmarks.md, "bf16 on the CPU").
"""

from __future__ import annotations

import argparse
import random
import statistics
import time

import torch
from bench_learner import DEFAULT_MODEL, default_run_batch, default_run_prompts
from rich.console import Console
from rich.table import Table

from actors._grpo import LossConfig
from actors._learner_core import LearnerConfig, LearnerCore, Trajectory
from policies.neural import use_threads
from policies.transformer import TransformerPolicy, cpu_multiplies_bf16
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


def _core(reference_dtype: torch.dtype, threads: int) -> LearnerCore:
    """A learner on the default model with the default run's KL anchor (fresh weights)."""
    return LearnerCore(
        SwitchablePolicy(DEFAULT_MODEL, seed=0),
        LearnerConfig(loss=LossConfig(kl_coef=0.1), threads=threads),
        reference=SwitchablePolicy(DEFAULT_MODEL, seed=0, dtype=reference_dtype),
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--threads",
        type=int,
        default=0,
        help="torch threads (0: its default; the RL phase's "
        "generator and learner each take half the cores)",
    )
    args = parser.parse_args()
    if args.rounds < 1:
        parser.error(f"--rounds: must be >= 1, got {args.rounds}")
    if args.threads < 0:
        parser.error(f"--threads: must be >= 0, got {args.threads}")
    rng = random.Random(args.seed)
    fp32 = SwitchablePolicy(DEFAULT_MODEL, seed=0)
    bf16 = SwitchablePolicy(DEFAULT_MODEL, seed=0, dtype=torch.bfloat16)
    bf16.load_state_dict(fp32.state_dict(), version=0)
    tasks = ProceduralTasks(seed=0, max_level=3)
    enc = fp32.tokenizer.encode
    few = default_run_prompts(rng, tasks, enc)
    many = default_run_prompts(rng, tasks, enc, count=96)
    batches = [default_run_batch(rng, tasks, enc) for _ in range(args.rounds)]
    cores = {
        "fp32": _core(torch.float32, args.threads),
        "bf16 reference": _core(torch.bfloat16, args.threads),
    }
    # (policy or learner, autocast on): the arms of each measurement
    gen_arms = {"fp32": (fp32, False), "bf16 autocast": (fp32, True), "bf16 weights": (bf16, False)}
    step_arms = {
        "fp32": (cores["fp32"], False),
        "bf16 autocast": (cores["fp32"], True),
        "bf16 reference": (cores["bf16 reference"], False),
    }
    for core, on in step_arms.values():  # warm-up: allocator, kernels, the first Adam step
        SwitchablePolicy.bf16 = on
        _step_s(core, batches[0])
    for policy, on in gen_arms.values():
        SwitchablePolicy.bf16 = on
        use_threads(args.threads)  # the learner's step sets its own count in this thread
        _tokens_per_s(policy, few)
    steps: dict[str, list[float]] = {name: [] for name in step_arms}
    speed: dict[str, dict[int, list[float]]] = {
        name: {len(few): [], len(many): []} for name in gen_arms
    }
    for r in range(args.rounds):
        for name in list(step_arms) if r % 2 == 0 else list(reversed(step_arms)):
            core, on = step_arms[name]  # each arm first in turn: all see the same machine load
            SwitchablePolicy.bf16 = on
            steps[name].append(_step_s(core, batches[r]))
        for name in list(gen_arms) if r % 2 == 0 else list(reversed(gen_arms)):
            policy, on = gen_arms[name]
            SwitchablePolicy.bf16 = on
            use_threads(args.threads)
            for prompts in (few, many):
                speed[name][len(prompts)].append(_tokens_per_s(policy, prompts))
    console = Console()
    console.print(
        f"{torch.get_num_threads()} threads each; bf16 in hardware: {cpu_multiplies_bf16()}; "
        f"{args.rounds} rounds per arm"
    )
    table = Table(title="learner step with its KL reference, s (median)")
    for column in ("arm", "s/step", "steps/s vs fp32"):
        table.add_column(column)
    base = statistics.median(steps["fp32"])
    for name in step_arms:
        median = statistics.median(steps[name])
        table.add_row(name, f"{median:.3f}", f"{base / median:.2f}x")
    console.print(table)
    table = Table(title="generation, tokens/s (median)")
    for column in ("arm", f"{len(few)} prompts", "vs fp32", f"{len(many)} prompts", "vs fp32"):
        table.add_column(column)
    for name in gen_arms:
        row = [name]
        for size in (len(few), len(many)):
            median = statistics.median(speed[name][size])
            row += [f"{median:.0f}", f"{median / statistics.median(speed['fp32'][size]):.2f}x"]
        table.add_row(*row)
    console.print(table)


if __name__ == "__main__":
    main()
