#!/usr/bin/env python3
"""Probe: where does the event loop's lag come from in `roost bench scale`'s sim part?

Plays the sim part (same workload: N rollouts in flight at once on sim sandboxes, generator
stubbed by its latency model) and, during its timed rounds only, records:

- every loop iteration's duration (asyncio's `_run_once`: the select, the due timers, and every
  ready callback run back to back; a sleeper wakes late by about the iteration it waited behind),
  and how many callbacks each ran;
- every callback's duration (`Handle._run`), with the slowest ones named;
- every cyclic-collector pass (`gc.callbacks`): generation, duration, objects collected.

Instrumenting needs the pure-Python loop, so the probe runs on asyncio, not uvloop (absolute
figures differ; where the time goes does not). Prints one JSON object.

python scripts/probe_loop_lag.py [--rollouts 10000] [--quick] [--thresholds 700,10,100]
"""

from __future__ import annotations

import argparse
import asyncio
import asyncio.base_events
import asyncio.events
import gc
import json
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import structlog

from roost.bench import _scale_rounds
from roost.bench.scale import _sim_part
from runtime import collector, run

SLOW_CALLBACK_S = 0.005


class Recorder:
    """Durations of loop iterations, callbacks and collections while `on` is set."""

    def __init__(self) -> None:
        self.on = False
        self.reset()

    def reset(self) -> None:
        self.iterations: list[tuple[float, int, float]] = []  # (seconds, callbacks, gc seconds)
        self.callbacks: list[float] = []
        self.slow: Counter[str] = Counter()
        self.slow_s: dict[str, float] = {}
        self.collections: list[tuple[int, float, int]] = []  # (generation, seconds, collected)
        self._iteration_callbacks = 0
        self._iteration_gc = 0.0
        self._gc_started = 0.0

    def on_gc(self, phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            self._gc_started = time.perf_counter()
            return
        took = time.perf_counter() - self._gc_started
        if self.on:
            self.collections.append((info["generation"], took, info["collected"]))
            self._iteration_gc += took


def _name(handle: asyncio.Handle) -> str:
    callback: Any = handle._callback  # type: ignore[attr-defined]
    owner = getattr(callback, "__self__", None)
    if isinstance(owner, asyncio.Task):
        return f"task:{owner.get_name()}"
    return getattr(callback, "__qualname__", repr(callback))


@contextmanager
def instrumented(recorder: Recorder) -> Iterator[None]:
    handle_run: Callable[[asyncio.Handle], None] = asyncio.events.Handle._run
    run_once = asyncio.base_events.BaseEventLoop._run_once  # type: ignore[attr-defined]

    def timed_handle(handle: asyncio.Handle) -> None:
        if not recorder.on:
            handle_run(handle)
            return
        started = time.perf_counter()
        handle_run(handle)
        took = time.perf_counter() - started
        recorder.callbacks.append(took)
        recorder._iteration_callbacks += 1
        if took > SLOW_CALLBACK_S:
            name = _name(handle)
            recorder.slow[name] += 1
            recorder.slow_s[name] = recorder.slow_s.get(name, 0.0) + took

    def timed_iteration(loop: Any) -> None:
        recorder._iteration_callbacks, recorder._iteration_gc = 0, 0.0
        started = time.perf_counter()
        run_once(loop)
        if recorder.on:
            recorder.iterations.append(
                (
                    time.perf_counter() - started,
                    recorder._iteration_callbacks,
                    recorder._iteration_gc,
                )
            )

    asyncio.events.Handle._run = timed_handle  # type: ignore[method-assign,assignment]
    asyncio.base_events.BaseEventLoop._run_once = timed_iteration  # type: ignore[attr-defined]
    gc.callbacks.append(recorder.on_gc)
    try:
        yield
    finally:
        asyncio.events.Handle._run = handle_run  # type: ignore[method-assign,assignment]
        asyncio.base_events.BaseEventLoop._run_once = run_once  # type: ignore[attr-defined]
        gc.callbacks.remove(recorder.on_gc)


def _quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else 0.0


def summary(recorder: Recorder) -> dict[str, Any]:
    iterations = recorder.iterations
    long = [it for it in iterations if it[0] > 0.020]
    by_gen: dict[int, list[float]] = {}
    for generation, took, _ in recorder.collections:
        by_gen.setdefault(generation, []).append(took)
    return {
        "iterations": len(iterations),
        "iteration_p99_ms": _quantile([it[0] for it in iterations], 0.99) * 1e3,
        "iteration_max_ms": max((it[0] for it in iterations), default=0.0) * 1e3,
        "iterations_over_20ms": len(long),
        "over_20ms_seconds": sum(it[0] for it in long),
        "over_20ms_callbacks_median": _quantile([float(it[1]) for it in long], 0.5),
        "over_20ms_gc_share": sum(it[2] for it in long) / max(1e-9, sum(it[0] for it in long)),
        "callbacks": len(recorder.callbacks),
        "callback_mean_us": sum(recorder.callbacks) / max(1, len(recorder.callbacks)) * 1e6,
        "callback_p99_us": _quantile(recorder.callbacks, 0.99) * 1e6,
        "callback_max_ms": max(recorder.callbacks, default=0.0) * 1e3,
        "slow_callbacks": {
            name: {"count": count, "seconds": round(recorder.slow_s[name], 3)}
            for name, count in recorder.slow.most_common(12)
        },
        "gc": {
            f"gen{generation}": {
                "count": len(took),
                "total_s": round(sum(took), 3),
                "max_ms": round(max(took) * 1e3, 1),
            }
            for generation, took in sorted(by_gen.items())
        },
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rollouts", type=int, default=10_000)
    parser.add_argument("--quick", action="store_true", help="latencies a quarter as long")
    parser.add_argument(
        "--thresholds",
        help="young,middle,full collector thresholds after the runtime's freeze "
        "(default: runtime.collector.TUNED_THRESHOLDS)",
    )
    args = parser.parse_args()
    structlog.configure(logger_factory=structlog.PrintLoggerFactory(sys.stderr))  # stdout: JSON
    if args.thresholds:
        young, middle, full = (int(part) for part in args.thresholds.split(","))
        collector.TUNED_THRESHOLDS = (young, middle, full)
    recorder = Recorder()
    timed_round = _scale_rounds._timed_round
    rounds: dict[str, dict[str, Any]] = {}

    async def recorded_round(*round_args: Any) -> dict[str, Any]:
        recorder.reset()
        recorder.on = True
        try:
            figures: dict[str, Any] = await timed_round(*round_args)
        finally:
            recorder.on = False
        keep = ("loop_lag_p99_ms", "loop_lag_own_p99_ms", "loop_lag_max_ms", "dispatches_per_s")
        rounds[round_args[-1]] = {
            "bench": {key: round(figures[key], 1) for key in keep},
            "gc_threshold": gc.get_threshold(),
            "probe": summary(recorder),
        }
        return figures

    _scale_rounds._timed_round = recorded_round  # type: ignore[assignment]
    spec = _sim_part(args.rollouts, args.quick, seed=0)
    with instrumented(recorder):
        run(_scale_rounds.play_part, spec, use_uvloop=False)
    print(json.dumps({"rollouts": args.rollouts, "rounds": rounds}, indent=1))


if __name__ == "__main__":
    main()
