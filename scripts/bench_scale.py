#!/usr/bin/env python3
"""Runnable alone: the scale benchmark suite (same as `roost bench scale`).

python scripts/bench_scale.py [--json] [--quick] [--repeats N]
"""

from roost.commands.bench_all import bench_scale

if __name__ == "__main__":
    bench_scale()
