"""Metrics: percentiles within the histogram's error, snapshots, JSONL, loop lag."""

from __future__ import annotations

import json
import math
from pathlib import Path

import anyio
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from runtime import ActorSystem, Histogram, MetricsRegistry
from runtime.monitor import write_metrics_jsonl
from tests.conftest import REAL
from tests.runtime._actors import Add, Counter, Read


@settings(max_examples=200)
@given(
    values=st.lists(st.floats(min_value=1e-6, max_value=1e4), min_size=1, max_size=500),
    q=st.sampled_from([0.0, 0.5, 0.9, 0.99, 1.0]),
)
def test_histogram_percentile_is_within_bucket_error_of_the_exact_one(
    values: list[float], q: float
) -> None:
    hist = Histogram("h")
    for value in values:
        hist.record(value)
    ordered = sorted(values)
    exact = ordered[max(0, math.ceil(q * len(ordered)) - 1)]
    assert hist.percentile(q) == pytest.approx(exact, rel=0.021)
    assert hist.count == len(values)
    assert hist.min == ordered[0]
    assert hist.max == ordered[-1]


def test_empty_histogram_reports_nan_and_bad_quantile_is_refused() -> None:
    hist = Histogram("h")
    assert math.isnan(hist.percentile(0.5))
    with pytest.raises(ValueError, match="0 <= q <= 1"):
        hist.percentile(1.5)


def test_registry_snapshot_and_kind_conflicts() -> None:
    registry = MetricsRegistry()
    registry.counter("requests").inc(3)
    registry.gauge("depth").set(7)
    registry.gauge("computed", lambda: 42.0)
    registry.histogram("latency").record(0.5)
    snap = registry.snapshot()
    assert snap["requests"] == 3
    assert snap["depth"] == 7
    assert snap["computed"] == 42.0
    assert snap["latency"]["count"] == 1.0
    assert registry.counter("requests") is registry.counter("requests")
    with pytest.raises(ValueError, match="'requests' is a Counter, not a Histogram"):
        registry.histogram("requests")


@pytest.mark.anyio
async def test_actor_metrics_count_messages_and_show_in_snapshots() -> None:
    async with ActorSystem(lag_interval=None) as system:
        counter = system.spawn(Counter, name="counter")
        for _ in range(100):
            await counter.tell(Add(amount=1))
        await counter.ask(Read(), timeout=1.0)
    snap = system.metrics.snapshot()
    assert snap["actor.counter.handled"] == 101
    assert snap["actor.counter.handler_s"]["count"] >= 101 // 16
    assert snap["actor.counter.mailbox_depth"] == 0.0


@pytest.mark.anyio
async def test_metrics_jsonl_writer_appends_one_record_per_interval(tmp_path: Path) -> None:
    path = tmp_path / "metrics.jsonl"
    registry = MetricsRegistry()
    ticks = registry.counter("ticks")
    async with anyio.create_task_group() as tg:
        tg.start_soon(lambda: write_metrics_jsonl(registry, path, interval=1.0))
        for _ in range(5):
            ticks.inc()
            await anyio.sleep(1.0)
        tg.cancel_scope.cancel()
    records = [json.loads(line) for line in path.read_text().splitlines()]
    assert len(records) >= 5
    assert records[-1]["ticks"] == 5
    assert all("t" in r and "wall" in r for r in records)


@pytest.mark.anyio
@pytest.mark.parametrize("anyio_backend", [REAL])
async def test_loop_lag_monitor_sees_a_blocked_loop(anyio_backend: object) -> None:
    import time

    async with ActorSystem(lag_interval=0.01) as system:
        lag = system.metrics.histogram("loop_lag_s")
        with anyio.fail_after(5):
            while lag.count < 1:  # noqa: ASYNC110 - polling a metric, bounded by fail_after
                await anyio.sleep(0.01)
            seen = lag.count
            time.sleep(0.2)  # noqa: ASYNC251 - block the loop on purpose: the monitor must notice
            while lag.count <= seen:  # noqa: ASYNC110
                await anyio.sleep(0.01)
        assert lag.max >= 0.05  # idle lag here is about a millisecond


def test_histogram_counts_nan_and_infinity_apart_instead_of_raising() -> None:
    hist = Histogram("is_weight_mean")
    for value in [1.0, math.nan, math.inf, 3.0]:
        hist.record(value)
    assert hist.nonfinite == 2
    assert hist.count == 2
    assert hist.summary()["mean"] == 2.0
    assert hist.max == 3.0
