#!/usr/bin/env python3
"""Probe: milliseconds per decoding step of the experiment's model, for one batch shape.

python scripts/probe_decode_step.py [--batch 96] [--prompt 250] [--threads 2] [--repo DIR]

Builds the experiment's model (width 192, 4 layers, 1.9M parameters) on the CPU, starts a
batch of `--batch` prompts of about `--prompt` tokens (prompt i is `--prompt` - i mod 50 long),
then times 7 calls of `advance(decoding, 8)`; prints the best of three, in ms per step. To
compare two commits side by side, check each out in its own worktree and alternate runs with
`--repo` pointing at each (docs/benchmarks.md, "The KV cache written in place").
"""

from __future__ import annotations

import argparse
import sys
import time


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=96)
    parser.add_argument("--prompt", type=int, default=250)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--repo", help="import the policy from this source tree")
    args = parser.parse_args()
    if args.repo:
        sys.path.insert(0, args.repo)
    import torch

    from policies.transformer import TransformerConfig, TransformerPolicy

    torch.set_num_threads(args.threads)
    config = TransformerConfig(d_model=192, n_layers=4, n_heads=4, max_len=512)
    policy = TransformerPolicy(config, device="cpu", seed=0)
    prompts = [
        [65 + (i * 7 + j) % 26 for j in range(args.prompt - i % 50)] for i in range(args.batch)
    ]

    def once() -> float:
        decoding = policy.start(prompts, max_new_tokens=64, temperature=1.0, seed=1)
        started = time.perf_counter()
        for _ in range(7):
            policy.advance(decoding, 8)
        return (time.perf_counter() - started) / 56

    once()  # warm-up
    print(f"{1e3 * min(once() for _ in range(3)):.2f} ms/step")


if __name__ == "__main__":
    main()
