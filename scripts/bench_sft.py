#!/usr/bin/env python3
"""SFT's step: one padded row per demonstration against demonstrations packed into rows.

python scripts/bench_sft.py [--steps N] [--seed S]

Draws batches of the default run's warm start (its demonstrations, `sft.batch_size` of them
a batch) and times a training step (loss, backward, AdamW) on the same batches two ways,
taking turns going first: every sequence in its own row padded to the batch's longest (how
`token_logprobs` scored them before 2026-12-05), and packed first-fit into rows of that width
(`pack_rows`; the default now). Reports the median seconds per step, the share of computed
positions that are real tokens, and the ratio (docs/benchmarks.md).
"""

from __future__ import annotations

import argparse
import random
import statistics
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

import torch
from rich.console import Console
from rich.table import Table

from policies.sft import sft_loss
from policies.transformer import TransformerPolicy, pack_rows
from roost.train.config import TrainConfig
from roost.train.phases import make_policy
from roost.train.task_source import TaskSource

Batch = list[tuple[list[int], list[int]]]


def padded_loss(policy: TransformerPolicy, batch: Batch) -> torch.Tensor:
    """The mean completion-token NLL with one right-padded row per sequence."""
    seqs = [p + c for p, c in batch]
    width = max(len(s) for s in seqs)
    tokens = torch.tensor([s + [policy.tokenizer.pad] * (width - len(s)) for s in seqs])
    valid = torch.tensor([[True] * len(s) + [False] * (width - len(s)) for s in seqs])
    positions = torch.arange(width).expand(len(seqs), width)
    logp = torch.log_softmax(policy.model(tokens, positions, valid)[:, :-1], dim=-1)
    picked = logp.gather(2, tokens[:, 1:].unsqueeze(2)).squeeze(2)
    total = sum(picked[i, len(p) - 1 : len(p) - 1 + len(c)].sum() for i, (p, c) in enumerate(batch))
    return -total / sum(len(c) for _, c in batch)


def packed_loss(policy: TransformerPolicy, batch: Batch) -> torch.Tensor:
    return sft_loss(policy, [p for p, _ in batch], [c for _, c in batch])


def real_share(batches: Sequence[Batch], packed: bool) -> float:
    real = computed = 0
    for batch in batches:
        lengths = [len(p) + len(c) for p, c in batch]
        width = max(lengths)
        rows = 1 + max(r for r, _ in pack_rows(lengths, width)) if packed else len(lengths)
        real += sum(lengths)
        computed += rows * width
    return real / computed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    if args.steps < 1:  # the warm-up step is not timed: nothing would be left to take a median of
        parser.error(f"--steps: must be >= 1, got {args.steps}")
    config = TrainConfig()
    with tempfile.TemporaryDirectory() as scratch:
        pairs = TaskSource(config.tasks, base_dir=Path(scratch)).demos()
    probe = make_policy(config.model, seed=0)
    enc = probe.tokenizer.encode
    data = [(enc(p), [*enc(c, bos=False), probe.tokenizer.eos]) for p, c in pairs]
    rng = random.Random(args.seed)
    batches = [
        [data[rng.randrange(len(data))] for _ in range(config.sft.batch_size)]
        for _ in range(args.steps + 1)
    ]
    arms = {"one padded row each": padded_loss, "packed rows": packed_loss}
    policies = {name: make_policy(config.model, seed=0) for name in arms}
    optimizers = {
        name: torch.optim.AdamW(policy.parameters(), lr=config.sft.lr)
        for name, policy in policies.items()
    }
    seconds: dict[str, list[float]] = {name: [] for name in arms}
    names = list(arms)
    for k, batch in enumerate(batches):
        for name in names[k % 2 :] + names[: k % 2]:  # each arm first in turn
            started = time.perf_counter()
            loss = arms[name](policies[name], batch)
            optimizers[name].zero_grad(set_to_none=True)
            loss.backward()  # type: ignore[no-untyped-call]
            optimizers[name].step()
            if k:  # the first batch warms the allocator and Adam's state
                seconds[name].append(time.perf_counter() - started)
    table = Table(title=f"SFT step, batches of {config.sft.batch_size}, {args.steps} steps")
    for column in ("arm", "median s/step", "real tokens of computed"):
        table.add_column(column, justify="left" if column == "arm" else "right")
    for name, values in seconds.items():
        share = real_share(batches, packed=name == "packed rows")
        table.add_row(name, f"{statistics.median(values):.3f}", f"{share:.0%}")
    console = Console()
    console.print(table)
    padded, packed = (statistics.median(v) for v in seconds.values())
    console.print(f"speed-up of packing: {padded / packed:.2f}x")


if __name__ == "__main__":
    main()
