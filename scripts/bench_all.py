#!/usr/bin/env python3
"""Runnable alone: every benchmark suite into one JSON file (same as `roost bench all`).

python scripts/bench_all.py --json OUT [--quick] [--repeats N]
"""

from roost.commands.bench_all import bench_all

if __name__ == "__main__":
    bench_all()
