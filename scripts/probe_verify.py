#!/usr/bin/env python3
"""Probe: milliseconds per verification of one answer in a warm bubblewrap sandbox.

python scripts/probe_verify.py [--tasks 40] [--rounds 3] [--repo DIR]

Starts one `process` sandbox, then verifies the canonical answer of `--tasks` procedural
level-2 tasks one after the other (`TestsVerifier`: the task's files, then the harness and one
child process for the tests), `--rounds` times; prints each round's mean and the best, in ms
per verification. Most of it is the two interpreters' start-up in the sandbox. To compare two
commits side by side, check each out in its own worktree and alternate runs with `--repo`
pointing at each (docs/benchmarks.md, "The harness's start-up").
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any


async def _rounds(tasks: int, rounds: int) -> list[float]:
    from sandboxes._spec import SandboxSpec
    from sandboxes.process import ProcessSandbox
    from tasks import ProceduralTasks, TestsVerifier

    source = ProceduralTasks(seed=0)
    batch = [source.task(2, i) for i in range(tasks)]
    verifier = TestsVerifier()
    means: list[float] = []
    async with ProcessSandbox(SandboxSpec(backend="process")) as sandbox:
        await verifier.verify(batch[0], batch[0].canonical_solution or "", sandbox)  # warm
        for _ in range(rounds):
            started = time.perf_counter()
            for task in batch:
                verdict = await verifier.verify(task, task.canonical_solution or "", sandbox)
                if not verdict.passed:
                    raise SystemExit(f"{task.id}: the canonical answer failed: {verdict.reason}")
            means.append((time.perf_counter() - started) / tasks * 1000)
    return means


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--tasks", type=int, default=40)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--repo", help="import roost from this source tree")
    args = parser.parse_args()
    if args.tasks < 1 or args.rounds < 1:
        parser.error("--tasks and --rounds must be >= 1")
    if args.repo:
        sys.path.insert(0, args.repo)
    import anyio

    from runtime.logs import configure_logging

    configure_logging(level="warning")
    means: Any = anyio.run(_rounds, args.tasks, args.rounds)
    rounds = ", ".join(f"{m:.1f}" for m in means)
    sys.stdout.write(f"ms per verification: rounds {rounds}; best {min(means):.1f}\n")


if __name__ == "__main__":
    main()
