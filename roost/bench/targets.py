"""What each benchmark suite promises: a figure of its result, a target, and which way is better.

The targets of runtime, generation and async are those of docs/benchmarks.md; a suite module
may declare its own as `TARGETS` (a list of `Target`), which then take precedence. `verdicts`
says, for one result, whether each target is met; `gross_regressions` says which figures fell
past half their target (a ratio under half its target, a cost over twice it), the line the
regression guard draws so that a ten-fold slowdown cannot land while noise does not fail CI.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from typing import Any, Literal

__all__ = ["TARGETS", "Target", "gross_regressions", "targets_of", "verdicts"]


@dataclasses.dataclass(frozen=True)
class Target:
    """`figure` is a dotted path into the suite's result, e.g. ``sim.loop_lag_p99_ms``.

    `guard`, when set, is the figure the regression guard checks in its place: the same
    quantity measured so that other processes on the machine cannot inflate it.
    """

    figure: str
    target: float
    better: Literal["higher", "lower"]
    guard: str | None = None

    def value_in(self, result: Mapping[str, Any], figure: str | None = None) -> float | None:
        node: Any = result
        for part in (figure or self.figure).split("."):
            if not isinstance(node, Mapping) or part not in node:
                return None
            node = node[part]
        return float(node) if isinstance(node, int | float) else None

    def met(self, value: float) -> bool:
        return value >= self.target if self.better == "higher" else value <= self.target

    def grossly_missed(self, value: float) -> bool:
        """Past half the target: a ratio below target / 2, a cost above 2 x target (a target of
        zero, a count of failures, allows none)."""
        if self.better == "higher":
            return value < self.target / 2
        return value > 2 * self.target

    def describe(self) -> str:
        return f"{self.figure} {'>=' if self.better == 'higher' else '<='} {self.target:g}"


TARGETS: dict[str, list[Target]] = {
    "runtime": [Target("pipeline_ratio", 1.0, "higher"), Target("ask_ratio", 0.7, "higher")],
    "generation": [Target("actor_vs_offline_ratio", 0.8, "higher")],
    "async": [Target("async_speedup", 2.5, "higher")],
}


def targets_of(suite: str, module: Any = None) -> list[Target]:
    """The suite's own `TARGETS` when its module declares them, else the table above."""
    declared = getattr(module, "TARGETS", None)
    if isinstance(declared, Sequence) and all(isinstance(t, Target) for t in declared):
        return list(declared)
    return TARGETS.get(suite, [])


def verdicts(targets: Sequence[Target], result: Mapping[str, Any]) -> list[dict[str, Any]]:
    """One line per target: the figure, its value (None: absent from the result), met or not."""
    lines = []
    for target in targets:
        value = target.value_in(result)
        lines.append(
            {
                "figure": target.figure,
                "target": target.describe(),
                "value": value,
                "met": None if value is None else target.met(value),
            }
        )
    return lines


def gross_regressions(targets: Sequence[Target], result: Mapping[str, Any]) -> list[str]:
    """A message per figure past half its target (or absent), naming the figure and value;
    a target with a `guard` figure is judged by that one."""
    problems = []
    for target in targets:
        figure = target.guard or target.figure
        value = target.value_in(result, figure)
        if value is None:
            problems.append(f"{figure}: absent from the result (target {target.describe()})")
        elif not math.isfinite(value):
            # NaN compares false both ways, so it would pass every bound: an empty histogram's
            # percentile, or a ratio of nothing, is a broken measurement, not a met target.
            problems.append(f"{figure} = {value}, not a finite number (target {target.describe()})")
        elif target.grossly_missed(value):
            bound = target.target / 2 if target.better == "higher" else 2 * target.target
            problems.append(
                f"{figure} = {value:.4g}, past half its target {target.describe()} "
                f"(gross regression bound {bound:g})"
            )
    return problems
