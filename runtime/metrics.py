"""Counters, gauges and histograms, and a registry that snapshots them as one dict.

Recording is a few attribute updates and no allocation, so it can sit on a hot path: the
histogram keeps counts in logarithmic buckets (about 2% relative error on any percentile)
instead of storing samples.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, TypeVar

import structlog

__all__ = ["Counter", "Gauge", "Histogram", "MetricsRegistry"]

_log = structlog.get_logger("roost.metrics")


class Counter:
    """A monotonically increasing count."""

    __slots__ = ("name", "value")

    def __init__(self, name: str) -> None:
        self.name = name
        self.value = 0

    def inc(self, amount: int = 1) -> None:
        self.value += amount


class Gauge:
    """A value that goes up and down; either set directly or read from a callback at snapshot."""

    __slots__ = ("_read", "name", "value")

    def __init__(self, name: str, read: Callable[[], float] | None = None) -> None:
        self.name = name
        self.value: float = 0.0
        self._read = read

    def set(self, value: float) -> None:
        self.value = value

    def read(self) -> float:
        return self._read() if self._read is not None else self.value


class Histogram:
    """A distribution of non-negative values with percentiles from logarithmic buckets.

    Values at or below `floor` share the first bucket; above it each bucket is `growth` times
    wider than the last, so a percentile is accurate to about ``growth - 1`` relative error.
    Min, max, count and sum are exact.
    """

    __slots__ = (
        "_buckets",
        "_floor",
        "_inv_log_growth",
        "count",
        "max",
        "min",
        "name",
        "nonfinite",
        "sum",
    )

    def __init__(self, name: str, *, floor: float = 1e-7, growth: float = 1.02) -> None:
        if floor <= 0 or growth <= 1:
            raise ValueError("Histogram needs floor > 0 and growth > 1")
        self.name = name
        self._floor = floor
        self._inv_log_growth = 1.0 / math.log(growth)
        self._buckets: dict[int, int] = {}
        self.count = 0
        self.sum = 0.0
        self.min = math.inf
        self.max = -math.inf
        self.nonfinite = 0  # NaN or +inf values offered to `record`, kept out of the rest

    def record(self, value: float) -> None:
        """Add `value`. NaN and +inf fit no bucket: they are only counted, in `nonfinite`
        (a diverged statistic must not crash the actor that records it)."""
        try:
            index = (
                0
                if value <= self._floor
                else 1 + int(math.log(value / self._floor) * self._inv_log_growth)
            )
        except (ValueError, OverflowError):  # int(nan), int(inf): no test on the hot path
            if not self.nonfinite:
                _log.warning("histogram_nonfinite_value", histogram=self.name, value=value)
            self.nonfinite += 1
            return
        self.count += 1
        self.sum += value
        if value < self.min:
            self.min = value
        if value > self.max:
            self.max = value
        buckets = self._buckets
        buckets[index] = buckets.get(index, 0) + 1

    def percentile(self, q: float) -> float:
        """The value below which a fraction `q` (0..1) of recorded values fall; NaN if empty."""
        if not 0.0 <= q <= 1.0:
            raise ValueError(f"percentile needs 0 <= q <= 1, got {q}")
        if self.count == 0:
            return math.nan
        rank = q * self.count
        seen = 0
        for index in sorted(self._buckets):
            seen += self._buckets[index]
            if seen >= rank:
                upper = self._floor * math.exp(index / self._inv_log_growth)
                return min(max(upper, self.min), self.max)
        return self.max

    def summary(self) -> dict[str, float]:
        """Count, mean, min, p50, p90, p99 and max, as plain floats (NaN when empty)."""
        empty = self.count == 0
        return {
            "count": float(self.count),
            "mean": math.nan if empty else self.sum / self.count,
            "min": math.nan if empty else self.min,
            "p50": self.percentile(0.5),
            "p90": self.percentile(0.9),
            "p99": self.percentile(0.99),
            "max": math.nan if empty else self.max,
        }


_M = TypeVar("_M", Counter, Gauge, Histogram)


class MetricsRegistry:
    """Named metrics, created on first use, snapshotted together.

    Asking twice for the same name returns the same object; asking for a name already used by
    another kind of metric raises `ValueError`.
    """

    def __init__(self) -> None:
        self._metrics: dict[str, Counter | Gauge | Histogram] = {}

    def counter(self, name: str) -> Counter:
        return self._get(name, Counter, lambda: Counter(name))

    def gauge(self, name: str, read: Callable[[], float] | None = None) -> Gauge:
        return self._get(name, Gauge, lambda: Gauge(name, read))

    def histogram(self, name: str, **options: float) -> Histogram:
        return self._get(name, Histogram, lambda: Histogram(name, **options))

    def remove(self, name: str) -> None:
        self._metrics.pop(name, None)

    def snapshot(self) -> dict[str, Any]:
        """Every metric's current value: counters and gauges as numbers, histograms as dicts."""
        out: dict[str, Any] = {}
        for name, metric in sorted(self._metrics.items()):
            if isinstance(metric, Counter):
                out[name] = metric.value
            elif isinstance(metric, Gauge):
                out[name] = metric.read()
            else:
                out[name] = metric.summary()
        return out

    def _get(self, name: str, kind: type[_M], make: Callable[[], _M]) -> _M:
        metric = self._metrics.get(name)
        if metric is None:
            created = make()
            self._metrics[name] = created
            return created
        if not isinstance(metric, kind):
            raise ValueError(f"metric {name!r} is a {type(metric).__name__}, not a {kind.__name__}")
        return metric
