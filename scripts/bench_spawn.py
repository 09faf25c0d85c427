#!/usr/bin/env python3
"""Starting a child from a big process: uvloop's fork against `sandboxes._spawn`'s vfork.

python scripts/bench_spawn.py [--sizes 100,1000,2000] [--spawns 40] [--json]

A trainer's process maps torch, a model and its optimizer: for each ballast size (MiB of
touched memory held by this process, standing in for that), starts `true` `--spawns` times
with `anyio.open_process` (on uvloop: libuv's fork, which copies the page tables) and with
`sandboxes._spawn.spawn` (CPython's vfork), alternating the two, on the same uvloop loop. For
each it reports the mean start-to-exit time and the longest stall of a 1 ms ticker task
running beside them: how long the event loop was held. The process backend starts two
children per sandbox (a mount as root, and bubblewrap), so a pool of 256 pays this 512 times.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import time
from typing import Any

import anyio
import torch
from rich.console import Console
from rich.table import Table

from sandboxes._spawn import spawn

TICK_S = 0.001


async def _fork_start() -> None:
    proc = await anyio.open_process(["true"], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    await proc.wait()
    await proc.aclose()


async def _vfork_start() -> None:
    proc = await spawn(["true"])
    await proc.wait()
    proc.close_pipes()


async def _measure(spawns: int) -> dict[str, dict[str, float]]:
    arms = {"fork (uvloop)": _fork_start, "vfork (_spawn)": _vfork_start}
    times: dict[str, list[float]] = {name: [] for name in arms}
    stalls: dict[str, float] = dict.fromkeys(arms, 0.0)
    current: list[str] = []

    async def ticker() -> None:
        last = time.perf_counter()
        while True:
            await anyio.sleep(TICK_S)
            now = time.perf_counter()
            if current:
                stalls[current[0]] = max(stalls[current[0]], now - last - TICK_S)
            last = now

    async with anyio.create_task_group() as tg:
        tg.start_soon(ticker)
        for _ in range(spawns):
            for name, start in arms.items():
                current[:] = [name]
                t0 = time.perf_counter()
                await start()
                times[name].append(time.perf_counter() - t0)
                current.clear()
                await anyio.sleep(5 * TICK_S)  # let the ticker see a quiet loop between arms
        tg.cancel_scope.cancel()
    return {
        name: {"mean_ms": 1e3 * sum(ts) / len(ts), "max_stall_ms": 1e3 * stalls[name]}
        for name, ts in times.items()
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="100,1000,2000", help="ballast sizes in MiB")
    parser.add_argument("--spawns", type=int, default=40)
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args()
    if args.spawns < 1:  # a mean of no starts
        parser.error(f"--spawns: must be >= 1, got {args.spawns}")
    try:
        sizes = [int(s) for s in args.sizes.split(",")]
    except ValueError:
        parser.error(f"--sizes: comma-separated whole MiB, got {args.sizes!r}")
    if min(sizes) < 0:
        parser.error(f"--sizes: must be >= 0 MiB, got {args.sizes!r}")
    results: dict[str, Any] = {}
    for mib in sizes:
        ballast = torch.ones(mib * 2**20 // 4)  # touched: resident, as a model's tensors are
        results[f"{mib} MiB"] = anyio.run(
            _measure, args.spawns, backend="asyncio", backend_options={"use_uvloop": True}
        )
        del ballast
    if args.json:
        print(json.dumps(results))
        return
    table = Table(title=f"starting `true` ({args.spawns} times each, uvloop)")
    for column in ("ballast", "arm", "mean start", "longest loop stall", "fork / vfork"):
        table.add_column(column, justify="right" if column != "arm" else "left")
    for size, arms in results.items():
        (fork_name, fork), (vfork_name, vfork) = arms.items()
        ratio = f"{fork['mean_ms'] / vfork['mean_ms']:.0f}x"
        table.add_row(
            size, fork_name, f"{fork['mean_ms']:.1f} ms", f"{fork['max_stall_ms']:.1f} ms", ratio
        )
        table.add_row(
            "", vfork_name, f"{vfork['mean_ms']:.1f} ms", f"{vfork['max_stall_ms']:.1f} ms", ""
        )
    Console().print(table)


if __name__ == "__main__":
    main()
