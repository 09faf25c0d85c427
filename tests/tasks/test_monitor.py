"""The reward monitor raises each alarm on its shift, once, and stays quiet on steady rewards."""

from __future__ import annotations

import random

from tasks import MonitorConfig, RewardMonitor

CONFIG = MonitorConfig(window=50, min_baseline=50)


def feed(
    monitor: RewardMonitor, n: int, *, rate: float, length: int, evals: float = 0.0, seed: int = 0
) -> list[str]:
    rng = random.Random(seed)
    kinds: list[str] = []
    for _ in range(n):
        alarms = monitor.observe(
            "g", passed=rng.random() < rate, length=length, evaluation_failed=rng.random() < evals
        )
        kinds += [a.kind for a in alarms]
    return kinds


def test_steady_rewards_raise_nothing() -> None:
    monitor = RewardMonitor(CONFIG)
    assert feed(monitor, 400, rate=0.4, length=100, evals=0.01) == []
    stats = monitor.statistics("g")
    assert stats is not None
    assert stats.baseline_pass_rate is not None
    assert abs(stats.baseline_pass_rate - 0.4) < 0.15


def test_a_sudden_pass_rate_jump_raises_one_alarm() -> None:
    monitor = RewardMonitor(CONFIG)
    feed(monitor, 200, rate=0.2, length=100)
    assert feed(monitor, 80, rate=1.0, length=100, seed=1) == ["pass_rate_jump"]


def test_an_output_length_collapse_raises_an_alarm() -> None:
    monitor = RewardMonitor(CONFIG)
    feed(monitor, 200, rate=0.3, length=200)
    assert feed(monitor, 80, rate=0.3, length=20) == ["length_collapse"]


def test_a_spike_of_evaluation_failures_raises_an_alarm() -> None:
    monitor = RewardMonitor(CONFIG)
    feed(monitor, 200, rate=0.3, length=100, evals=0.0)
    assert feed(monitor, 80, rate=0.3, length=100, evals=0.6) == ["evaluation_failure_spike"]


def test_groups_are_watched_apart() -> None:
    monitor = RewardMonitor(CONFIG)
    for _ in range(120):
        monitor.observe("a", passed=True, length=10, evaluation_failed=False)
    assert monitor.groups() == ["a"]
    assert monitor.statistics("b") is None
