#!/usr/bin/env python3
"""Runnable alone: the sandbox benchmark suite (same as `roost bench sandbox`).

python scripts/bench_sandbox.py [--json] [--quick] [--repeats N]
"""

from roost.commands.bench import bench_sandbox

if __name__ == "__main__":
    bench_sandbox()
