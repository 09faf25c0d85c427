#!/usr/bin/env python3
"""Probe: how likely a checkpoint samples the canonical solution of each form of a chain level.

python scripts/probe_canonical_logprob.py RUN_DIR [--checkpoint sft.pt] [--level 3]
    [--tasks 20] [--scan 5000]

Loads RUN_DIR's model with a checkpoint of its `checkpoints/`, takes up to `--tasks` tasks of
each operation form among the first `--scan` training tasks of chain level `--level` (`roost
answers --by-form` names the forms: `III` is three infix operations), and scores each task's
canonical solution under the model at temperature 1: its total log-probability in nats
(sampling writes it about once in exp(-total) draws) and its least likely byte, shown in
place (`return (|(`: the second parenthesis). Nothing runs: the canonical solutions are
generated here. At a test-only level they are never trained on; the probe only asks how far
sampling is from them (docs/training-log.md, "Session 30").
"""

from __future__ import annotations

import argparse
import statistics
from pathlib import Path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run_dir", type=Path)
    parser.add_argument("--checkpoint", default="sft.pt")
    parser.add_argument("--level", type=int, default=3)
    parser.add_argument("--tasks", type=int, default=20, help="tasks per form")
    parser.add_argument("--scan", type=int, default=5000, help="training tasks read")
    args = parser.parse_args()
    if not 2 <= args.level <= 4:
        parser.error(f"--level: a chain level of two to four operations, got {args.level}")

    import torch

    from policies.tokenizer import ByteTokenizer
    from roost.train.config import ConfigError, load_train_config
    from roost.train.phases import load_weights, make_policy
    from roost.train.task_source import procedural_tasks
    from tasks._chain_ast import parse_chain
    from tasks.procedural import chain_form

    try:
        config = load_train_config(args.run_dir / "config.toml")
    except ConfigError as exc:
        parser.error(f"{args.run_dir}: not a roost train run directory ({exc})")
    if config.tasks.source != "procedural":
        source = config.tasks.source
        parser.error(f"{args.run_dir}: tasks.source is {source!r}; chains are procedural")
    supply = procedural_tasks(config.tasks)
    policy = make_policy(config.model, seed=config.seed)
    try:
        load_weights(policy, args.run_dir / "checkpoints" / args.checkpoint)
    except ValueError as exc:
        parser.error(str(exc))
    tokenizer = ByteTokenizer()

    by_form: dict[str, list[tuple[str, str]]] = {}
    for task in supply.take(args.level, args.scan, split="train"):
        chain = parse_chain(task.canonical_solution or "")
        if chain is None:
            continue
        form = by_form.setdefault(chain_form(kind for kind, _ in chain), [])
        if len(form) < args.tasks:
            form.append((task.prompt, task.canonical_solution or ""))

    print(f"{args.run_dir} {args.checkpoint}, level {args.level}, temperature 1")
    print(f"{'form':5} {'tasks':>5} {'total (median)':>15} {'least likely byte (median)':>27}")
    for form, pairs in sorted(by_form.items()):
        prompts, solutions = [p for p, _ in pairs], [s for _, s in pairs]
        completions = [[*tokenizer.encode(s, bos=False), tokenizer.eos] for s in solutions]
        with torch.no_grad():
            logprobs, mask = policy.token_logprobs(
                [tokenizer.encode(p) for p in prompts], completions
            )
        totals = (logprobs * mask).sum(dim=1).tolist()
        worst = logprobs.masked_fill(mask == 0, float("inf")).min(dim=1)
        least, at_byte = worst.values.tolist(), worst.indices.tolist()
        example = solutions[0].strip()
        at = at_byte[0] - (len(solutions[0]) - len(solutions[0].lstrip()))
        shown = f"{example[:at]}|{example[at : at + 1]}" if at < len(example) else example
        print(
            f"{form:5} {len(prompts):5} {statistics.median(totals):15.1f} "
            f"{statistics.median(least):27.1f}   e.g. {shown!r}"
        )


if __name__ == "__main__":
    main()
