#!/usr/bin/env python3
"""Runnable alone: the generation benchmark suite (same as `roost bench generation`).

python scripts/bench_generation.py [--json] [--quick] [--repeats N]
"""

from roost.commands.bench import bench_generation

if __name__ == "__main__":
    bench_generation()
