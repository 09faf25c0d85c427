#!/usr/bin/env python3
"""Benchmark: verifying a run's answers with and without reused verdicts, side by side.

python scripts/bench_reuse.py RUN_DIR [--turns 2000] [--sandboxes 32] [--rounds 2]

Replays the first `--turns` model turns of a procedural run's trajectory log (its tasks and
answers, in the order they ended) through `--sandboxes` warm bubblewrap sandboxes at once, with
`TestsVerifier` alone and wrapped in `ReusingVerifier` (`episode.reuse_verdicts`), the arms
alternating over `--rounds`. Prints each arm's turns/s, CPU of the whole machine per turn (the
sandboxes' processes and this one: run it on a quiet machine) and share of turns the harness
ran, and the ratios; says so if the arms judged any turn differently. Method and results:
docs/benchmarks.md, "Reused verdicts".
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path
from typing import Any


def _busy_s() -> float:
    """CPU seconds the whole machine has spent busy (/proc/stat): the sandboxes' processes
    are not this process's children, so its own rusage cannot see them."""
    with open("/proc/stat") as stat:
        fields = [int(v) for v in stat.readline().split()[1:]]
    user, nice, system, _idle, _iowait, irq, softirq = fields[:7]
    return (user + nice + system + irq + softirq) / os.sysconf("SC_CLK_TCK")


def _turns(run_dir: Path, count: int) -> list[tuple[Any, str]]:
    from roost.train.config import ConfigError, load_train_config
    from roost.train.records import TrajectoryRecord
    from roost.train.rundir import RunDir
    from roost.train.summary import load_run_records
    from roost.train.task_source import procedural_tasks
    from tasks import ProceduralTasks

    run = RunDir(run_dir)
    try:
        config = load_train_config(run.config).tasks
    except ConfigError as exc:  # a mistyped RUN_DIR: one line, not a traceback
        raise SystemExit(f"{run_dir}: not a roost train run directory ({exc})") from None
    if config.source != "procedural":
        raise SystemExit(f"{run_dir}: tasks.source is {config.source!r}; this replays procedural")
    generator = procedural_tasks(config)
    records, _ = load_run_records(run)
    scored = [r for r in records if isinstance(r, TrajectoryRecord) and r.status == "scored"]
    scored.sort(key=lambda r: r.finished_at)
    out: list[tuple[Any, str]] = []
    for record in scored:
        index = ProceduralTasks.stream_index(record.task_id)
        if index is None:
            continue
        task = generator.task(record.level, index)
        out += [(task, turn.text) for turn in record.turns]
        if len(out) >= count:
            break
    return out[:count]


async def _arm(turns: list[tuple[Any, str]], sandboxes: int, reuse: bool) -> dict[str, Any]:
    import anyio

    from sandboxes._spec import SandboxSpec
    from sandboxes.process import ProcessSandbox
    from tasks import ReusingVerifier, TestsVerifier, Verdict, Verifier

    plain = TestsVerifier()
    verifier: Verifier = ReusingVerifier(plain) if reuse else plain
    verdicts: list[Verdict | None] = [None] * len(turns)
    queue = list(range(len(turns)))
    busy = _busy_s()
    started = time.perf_counter()

    async def worker() -> None:
        async with ProcessSandbox(SandboxSpec(backend="process")) as sandbox:
            while queue:
                i = queue.pop(0)
                task, text = turns[i]
                verdicts[i] = await verifier.verify(task, text, sandbox)

    async with anyio.create_task_group() as group:
        for _ in range(sandboxes):
            group.start_soon(worker)
    wall = time.perf_counter() - started
    cpu = _busy_s() - busy
    runs = verifier.runs if isinstance(verifier, ReusingVerifier) else len(turns)
    return {"wall": wall, "cpu": cpu, "runs": runs, "verdicts": verdicts}


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("run_dir", type=Path)
    parser.add_argument("--turns", type=int, default=2000)
    parser.add_argument("--sandboxes", type=int, default=32)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    if min(args.turns, args.sandboxes, args.rounds) < 1:
        parser.error("--turns, --sandboxes and --rounds must be >= 1")
    import anyio

    from runtime.logs import configure_logging

    configure_logging(level="warning")
    turns = _turns(args.run_dir, args.turns)
    if not turns:
        raise SystemExit(f"{args.run_dir}: no scored turns in its trajectory log")
    totals = {arm: {"wall": 0.0, "cpu": 0.0, "runs": 0} for arm in ("plain", "reuse")}
    for _ in range(args.rounds):
        results = {}
        for arm in ("plain", "reuse"):
            result = anyio.run(_arm, turns, args.sandboxes, arm == "reuse")
            results[arm] = result
            for key in ("wall", "cpu", "runs"):
                totals[arm][key] += result[key]
        same = [
            (a.passed, a.score, a.failure) == (b.passed, b.score, b.failure)
            for a, b in zip(results["plain"]["verdicts"], results["reuse"]["verdicts"], strict=True)
            if a is not None and b is not None
        ]
        if not all(same):
            sys.stdout.write(f"verdicts differ on {same.count(False)} of {len(same)} turns\n")
    n = len(turns) * args.rounds
    for arm, t in totals.items():
        sys.stdout.write(
            f"{arm:5}: {n / t['wall']:7.1f} turns/s, {t['cpu'] / n * 1e3:6.2f} CPU ms a turn, "
            f"{t['runs'] / n:.1%} of turns run\n"
        )
    plain, reuse = totals["plain"], totals["reuse"]
    sys.stdout.write(
        f"reuse / plain: {plain['wall'] / reuse['wall']:.2f}x turns/s, "
        f"{reuse['cpu'] / plain['cpu']:.2f}x CPU ({len(turns)} turns of {args.run_dir}, "
        f"{args.sandboxes} sandboxes, {args.rounds} rounds)\n"
    )


if __name__ == "__main__":
    main()
