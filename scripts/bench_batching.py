#!/usr/bin/env python3
"""The generator answering each sequence when it finishes, against when its batch does.

python scripts/bench_early_reply.py --weights runs/RUN/checkpoints/sft.pt [--episodes 96]
    [--turns 3] [--exec-s 0.4] [--repeats 3] [--json]

`episodes` concurrent episodes each run `turns` turns on a real task prompt (procedural levels
1-3, a held-out function each): ask the `Generator` actor for a completion, then hold a
simulated sandbox for `exec_s` seconds (a sleep: the tests run in other processes, so this
process only waits). The two sides alternate within one run, on the same model and prompts.
With static batching a short completion waits for the longest one in its batch before its
tests can start; answered early, its tests run while the batch decodes. Trained weights are
needed: an untrained model writes to the token limit, so every sequence ends together.
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from actors.generator import GeneratorConfig
from policies.tokenizer import ByteTokenizer
from policies.transformer import TransformerPolicy
from roost.bench._report import machine
from roost.bench.generation import run_episodes
from roost.train.config import ModelConfig
from roost.train.phases import load_weights, make_policy
from runtime import run as run_loop
from tasks import ProceduralTasks


def _prompts(episodes: int) -> list[list[int]]:
    tasks = ProceduralTasks(seed=0)
    per_level = -(-episodes // 3)
    chosen = [t for level in (1, 2, 3) for t in tasks.take(level, per_level, split="heldout")][
        :episodes
    ]
    tok = ByteTokenizer()
    return [tok.encode(t.prompt) for t in chosen]


async def _side(
    policy: TransformerPolicy,
    prompts: list[list[int]],
    turns: int,
    exec_s: float,
    config: GeneratorConfig,
) -> dict[str, float]:
    result = await run_episodes(policy, prompts, turns, config, between_turns_s=exec_s)
    return {
        "turns_per_s": result.turns / result.elapsed_s,
        "latency_p50_s": result.turn_latency["p50"],
        "latency_p99_s": result.turn_latency["p99"],
        "batches": float(result.stats.batches),
        "mean_occupancy": result.stats.mean_occupancy,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[1])
    parser.add_argument("--weights", type=Path, required=True, help="a run's checkpoints/sft.pt")
    parser.add_argument("--episodes", type=int, default=96)
    parser.add_argument("--turns", type=int, default=3)
    parser.add_argument("--exec-s", type=float, default=0.4)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()

    policy = make_policy(ModelConfig(), seed=0)
    try:
        load_weights(policy, args.weights)
    except ValueError as exc:
        parser.error(str(exc))
    policy.train(False)
    prompts = _prompts(args.episodes)
    sides: dict[bool, list[dict[str, float]]] = {True: [], False: []}
    for repeat in range(args.repeats + 1):  # the first round warms up and is not kept
        for early in (False, True) if repeat % 2 else (True, False):
            config = GeneratorConfig(
                max_batch=128, max_wait_s=0.02, max_new_tokens=64, answer_early=early, seed=repeat
            )
            result = run_loop(_side, policy, prompts, args.turns, args.exec_s, config)
            if repeat:
                sides[early].append(result)

    def median(early: bool, key: str) -> float:
        return statistics.median(r[key] for r in sides[early])

    ratios = [
        e["turns_per_s"] / b["turns_per_s"] for e, b in zip(sides[True], sides[False], strict=True)
    ]
    out: dict[str, Any] = {
        "machine": machine(),
        "episodes": args.episodes,
        "turns": args.turns,
        "exec_s": args.exec_s,
        "repeats": args.repeats,
        **{
            f"{name}_{key}": median(early, key)
            for name, early in (("batch_end", False), ("early", True))
            for key in ("turns_per_s", "latency_p50_s", "latency_p99_s", "mean_occupancy")
        },
        "throughput_ratios": ratios,
        "throughput_ratio": statistics.median(ratios),
    }
    if args.json:
        print(json.dumps(out, indent=2))
        return
    table = Table(
        title=f"generator answers ({args.episodes} episodes x {args.turns} turns, medians)"
    )
    for column in ("answered", "turns/s", "latency p50", "latency p99", "occupancy"):
        table.add_column(column)
    for name in ("batch_end", "early"):
        table.add_row(
            name,
            f"{out[f'{name}_turns_per_s']:.1f}",
            f"{out[f'{name}_latency_p50_s'] * 1e3:.0f} ms",
            f"{out[f'{name}_latency_p99_s'] * 1e3:.0f} ms",
            f"{out[f'{name}_mean_occupancy']:.2f}",
        )
    Console().print(table)
    Console().print(
        f"throughput early / batch end: {out['throughput_ratio']:.2f} (per round {ratios})"
    )


if __name__ == "__main__":
    main()
