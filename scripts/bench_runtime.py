#!/usr/bin/env python3
"""Runnable alone: the runtime benchmark suite (same as `roost bench runtime`).

python scripts/bench_runtime.py [--json] [--quick] [--repeats N]
"""

from roost.commands.bench import bench_runtime

if __name__ == "__main__":
    bench_runtime()
