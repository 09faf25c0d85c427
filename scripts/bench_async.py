#!/usr/bin/env python3
"""Runnable alone: the async benchmark suite (same as `roost bench async`).

python scripts/bench_async.py [--json] [--quick] [--repeats N]
"""

from roost.commands.bench import bench_async

if __name__ == "__main__":
    bench_async()
