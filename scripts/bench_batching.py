#!/usr/bin/env python3
"""The generator's batching: answered when the batch ends, when each sequence ends, and
continuous (waiting requests join the running batch).

python scripts/bench_batching.py --weights runs/RUN/checkpoints/sft.pt [--episodes 96]
    [--turns 3] [--exec-s 0.4] [--spread 0.9] [--repeats 3] [--json]

`episodes` concurrent episodes each run `turns` turns on a real task prompt (procedural levels
1-3, a held-out function each): ask the `Generator` actor for a completion, then hold a
simulated sandbox for `exec_s` * [1 - spread, 1 + spread] seconds, drawn uniformly (a sleep:
the tests run in other processes, so this process only waits; the spread lets the episodes
drift apart, as real tests' times do). The three sides take turns within one run (the order
rotates each round), on the same model and prompts. With static batching a short completion
waits for the longest one in its batch before its tests can start; answered early, its tests
run while the batch decodes; continuous, its next turn also need not wait for the batch to
end before its own decoding starts. Trained weights are needed: an untrained model writes to
the token limit, so every sequence ends together.
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

#: The sides: static batching answered when the batch ends, static answered per sequence,
#: and continuous batching.
MODES: dict[str, dict[str, bool]] = {
    "batch_end": {"answer_early": False},
    "early": {"answer_early": True},
    "continuous": {"answer_early": True, "continuous": True},
}


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
    spread: float,
    config: GeneratorConfig,
) -> dict[str, float]:
    result = await run_episodes(
        policy, prompts, turns, config, between_turns_s=exec_s, spread=spread, seed=config.seed
    )
    return {
        "turns_per_s": result.turns / result.elapsed_s,
        "latency_p50_s": result.turn_latency["p50"],
        "latency_p99_s": result.turn_latency["p99"],
        "batches": float(result.stats.batches),
        "joins": float(result.stats.joins),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[1])
    parser.add_argument("--weights", type=Path, required=True, help="a run's checkpoints/sft.pt")
    parser.add_argument("--episodes", type=int, default=96)
    parser.add_argument("--turns", type=int, default=3)
    parser.add_argument("--exec-s", type=float, default=0.4)
    parser.add_argument(
        "--spread", type=float, default=0.9, help="each wait drawn from exec-s x [1 -/+ spread]"
    )
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    if not 0.0 <= args.spread <= 1.0:
        parser.error(f"--spread: must be in [0, 1], got {args.spread}")
    # Checked before the weights load and the warm-up round, which take minutes: with no kept
    # round there is no median, with no episode or turn no throughput.
    for option, value in (
        ("--repeats", args.repeats),
        ("--episodes", args.episodes),
        ("--turns", args.turns),
    ):
        if value < 1:
            parser.error(f"{option}: must be >= 1, got {value}")
    if not 0.0 <= args.exec_s < float("inf"):
        parser.error(f"--exec-s: must be a finite number >= 0, got {args.exec_s}")

    policy = make_policy(ModelConfig(), seed=0)
    try:
        load_weights(policy, args.weights)
    except ValueError as exc:
        parser.error(str(exc))
    policy.train(False)
    prompts = _prompts(args.episodes)
    modes = list(MODES)
    sides: dict[str, list[dict[str, float]]] = {mode: [] for mode in modes}
    for repeat in range(args.repeats + 1):  # the first round warms up and is not kept
        for mode in modes[repeat % 3 :] + modes[: repeat % 3]:
            config = GeneratorConfig(
                max_batch=128, max_wait_s=0.02, max_new_tokens=64, seed=repeat, **MODES[mode]
            )
            result = run_loop(_side, policy, prompts, args.turns, args.exec_s, args.spread, config)
            if repeat:
                sides[mode].append(result)

    def median(mode: str, key: str) -> float:
        return statistics.median(r[key] for r in sides[mode])

    def ratios(mode: str, base: str) -> list[float]:
        pairs = zip(sides[mode], sides[base], strict=True)
        return [a["turns_per_s"] / b["turns_per_s"] for a, b in pairs]

    out: dict[str, Any] = {
        "machine": machine(),
        "episodes": args.episodes,
        "turns": args.turns,
        "exec_s": args.exec_s,
        "spread": args.spread,
        "repeats": args.repeats,
        **{
            f"{mode}_{key}": median(mode, key)
            for mode in modes
            for key in ("turns_per_s", "latency_p50_s", "latency_p99_s", "batches", "joins")
        },
        "early_over_batch_end": ratios("early", "batch_end"),
        "continuous_over_early": ratios("continuous", "early"),
    }
    for key in ("early_over_batch_end", "continuous_over_early"):
        out[f"{key}_median"] = statistics.median(out[key])
    if args.json:
        print(json.dumps(out, indent=2))
        return
    table = Table(title=f"generator ({args.episodes} episodes x {args.turns} turns, medians)")
    for column in ("batching", "turns/s", "latency p50", "latency p99", "batches", "joins"):
        table.add_column(column)
    for mode in modes:
        table.add_row(
            mode,
            f"{out[f'{mode}_turns_per_s']:.1f}",
            f"{out[f'{mode}_latency_p50_s'] * 1e3:.0f} ms",
            f"{out[f'{mode}_latency_p99_s'] * 1e3:.0f} ms",
            f"{out[f'{mode}_batches']:.0f}",
            f"{out[f'{mode}_joins']:.0f}",
        )
    console = Console()
    console.print(table)
    for key, label in (
        ("early_over_batch_end", "early / batch end"),
        ("continuous_over_early", "continuous / early"),
    ):
        console.print(f"throughput {label}: {out[f'{key}_median']:.2f} (per round {out[key]})")


if __name__ == "__main__":
    main()
