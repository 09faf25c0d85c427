"""Benchmark scripts given a value they cannot use: one line naming the option, exit 2, before
any work (once, a traceback from a median of nothing after minutes of warm-up)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[2]


def _run(script: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(ROOT / "scripts" / script), *args],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=ROOT,
    )


@pytest.mark.parametrize(
    ("script", "args", "named"),
    [
        ("bench_learner.py", ["--repeats", "0"], "--repeats: must be >= 1"),
        ("bench_sft.py", ["--steps", "0"], "--steps: must be >= 1"),
        (
            "bench_batching.py",
            ["--weights", "no-such-weights.pt", "--repeats", "0"],
            "--repeats: must be >= 1",
        ),
        (
            "bench_batching.py",
            ["--weights", "no-such-weights.pt", "--exec-s", "nan"],
            "--exec-s: must be a finite number",
        ),
        ("bench_spawn.py", ["--spawns", "0"], "--spawns: must be >= 1"),
        ("bench_spawn.py", ["--sizes", "100,lots"], "--sizes: comma-separated whole MiB"),
    ],
)
def test_a_bad_value_is_refused_naming_the_option(script: str, args: list[str], named: str) -> None:
    done = _run(script, *args)
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    assert named in done.stderr
