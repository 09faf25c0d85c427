"""Turn timing rows and metric snapshots into a `Profile`: percentiles, breakdowns, a verdict."""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Mapping, Sequence
from typing import Any

import msgspec

from roost.profile.model import PHASES, LearnerStep, RolloutTiming
from runtime.faults import actor_role

__all__ = ["Profile", "analyze"]

#: Above this busy fraction an actor group is called saturated.
SATURATED = 0.9


class Profile(msgspec.Struct, kw_only=True):
    """Everything `roost profile` reports, as plain data (it is also written as JSON)."""

    rollouts: int
    by_status: dict[str, int]
    span_s: float
    #: phase -> {"p50", "p90", "p99", "mean", "total_s", "share"} over completed rollouts.
    phases: dict[str, dict[str, float]]
    #: Mean seconds per rollout in each phase, for rollouts finishing in each time bin.
    stacked_t: list[float]
    stacked: dict[str, list[float]]
    #: actor group -> {"t": [...], "busy": [...], "depth": [...]}; groups merge numbered names.
    actors: dict[str, dict[str, list[float]]]
    #: What the learner's steps were made of; None for runs without a learner.
    critical_path: dict[str, Any] | None
    bottleneck: str


def analyze(
    rollouts: Sequence[RolloutTiming],
    metrics: Sequence[Mapping[str, Any]] = (),
    steps: Sequence[LearnerStep] = (),
    *,
    bins: int = 20,
) -> Profile:
    """The profile of one run. `metrics` are snapshot lines of the run's metrics.jsonl."""
    if bins < 1:
        raise ValueError(f"bins must be >= 1, got {bins}")
    by_status: dict[str, int] = defaultdict(int)
    for row in rollouts:
        by_status[row.status] += 1
    measured = [row for row in rollouts if row.status == "completed"] or list(rollouts)
    phases = _phase_figures(measured)
    start = min((row.requested_at for row in rollouts), default=0.0)
    end = max((row.finished_at for row in rollouts), default=0.0)
    stacked_t, stacked = _stacked(measured, start, end, bins)
    actors = _actor_series(metrics)
    critical = _critical_path(steps, {row.rollout_id: row for row in rollouts})
    return Profile(
        rollouts=len(rollouts),
        by_status=dict(sorted(by_status.items())),
        span_s=max(0.0, end - start),
        phases=phases,
        stacked_t=stacked_t,
        stacked=stacked,
        actors=actors,
        critical_path=critical,
        bottleneck=_bottleneck(phases, actors, critical),
    )


def _percentile(ordered: Sequence[float], q: float) -> float:
    if not ordered:
        return 0.0
    return ordered[max(0, math.ceil(q * len(ordered)) - 1)]


def _phase_figures(rows: Sequence[RolloutTiming]) -> dict[str, dict[str, float]]:
    columns = {phase: sorted(row.phase_seconds()[phase] for row in rows) for phase in PHASES}
    grand = sum(sum(values) for values in columns.values())
    out: dict[str, dict[str, float]] = {}
    for phase, values in columns.items():
        total = sum(values)
        out[phase] = {
            "p50": _percentile(values, 0.50),
            "p90": _percentile(values, 0.90),
            "p99": _percentile(values, 0.99),
            "mean": total / len(values) if values else 0.0,
            "total_s": total,
            "share": total / grand if grand > 0 else 0.0,
        }
    return out


def _stacked(
    rows: Sequence[RolloutTiming], start: float, end: float, bins: int
) -> tuple[list[float], dict[str, list[float]]]:
    width = (end - start) / bins if end > start else 1.0
    sums = {phase: [0.0] * bins for phase in PHASES}
    counts = [0] * bins
    for row in rows:
        index = min(bins - 1, int((row.finished_at - start) / width))
        counts[index] += 1
        for phase, seconds in row.phase_seconds().items():
            sums[phase][index] += seconds
    means = {
        phase: [s / n if n else 0.0 for s, n in zip(values, counts, strict=True)]
        for phase, values in sums.items()
    }
    return [(i + 0.5) * width for i in range(bins)], means


def _actor_series(metrics: Sequence[Mapping[str, Any]]) -> dict[str, dict[str, list[float]]]:
    # Busy time between two snapshots is estimated as (handled since) x (mean handler time):
    # the runtime times a sample of handler calls, not every one, to stay cheap.
    series: dict[str, dict[str, list[float]]] = {}
    previous: Mapping[str, Any] | None = None
    for snapshot in metrics:
        if previous is not None:
            dt = float(snapshot.get("t", 0.0)) - float(previous.get("t", 0.0))
            if dt > 0:
                _add_point(series, previous, snapshot, dt)
        previous = snapshot
    return series


def _add_point(
    series: dict[str, dict[str, list[float]]],
    before: Mapping[str, Any],
    after: Mapping[str, Any],
    dt: float,
) -> None:
    busy: dict[str, float] = defaultdict(float)
    timed: set[str] = set()
    depth: dict[str, float] = defaultdict(float)
    members: dict[str, int] = defaultdict(int)
    for key, value in after.items():
        if not key.startswith("actor.") or not key.endswith(".handled"):
            continue
        name = key[len("actor.") : -len(".handled")]
        group = actor_role(name)
        members[group] += 1
        handled = float(value) - float(before.get(key, 0.0) or 0.0)
        timing = after.get(f"actor.{name}.handler_s")
        mean = timing.get("mean") if isinstance(timing, Mapping) else None
        if isinstance(mean, (int, float)) and math.isfinite(mean):
            timed.add(group)
            if handled > 0:
                busy[group] += min(1.0, handled * mean / dt)
        mailbox = after.get(f"actor.{name}.mailbox_depth")
        if isinstance(mailbox, (int, float)) and math.isfinite(mailbox):
            depth[group] += float(mailbox)
    t = float(after.get("t", 0.0))
    for group, count in members.items():
        entry = series.setdefault(group, {"t": [], "busy": [], "depth": []})
        entry["t"].append(t)
        # Without handler timings (a virtual-clock run times real CPU against simulated
        # seconds, which means nothing) busy stays empty rather than reading as idle.
        if group in timed:
            entry["busy"].append(busy[group] / count)
        entry["depth"].append(depth[group])


def _critical_path(
    steps: Sequence[LearnerStep], rollouts: Mapping[str, RolloutTiming]
) -> dict[str, Any] | None:
    # A step is waiting (for its batch) then computing. The wait ends when the last rollout of
    # the batch arrives, so that rollout is on the critical path: its phases share the wait.
    if not steps:
        return None
    wait_total = compute_total = 0.0
    blame: dict[str, float] = defaultdict(float)
    unattributed = 0.0
    for step in steps:
        wait = step.batch_ready_at - step.wait_started_at
        wait_total += wait
        compute_total += step.finished_at - step.batch_ready_at
        batch = [rollouts[r] for r in step.rollout_ids if r in rollouts]
        if not batch or wait <= 0:
            unattributed += max(0.0, wait)
            continue
        last = max(batch, key=lambda row: row.finished_at)
        seconds = last.phase_seconds()
        seconds.pop("learner_wait")  # the learner cannot wait on its own waiting
        spent = sum(seconds.values())
        if spent <= 0:
            unattributed += wait
            continue
        for phase, value in seconds.items():
            blame[phase] += wait * value / spent
    step_total = wait_total + compute_total
    return {
        "steps": len(steps),
        "mean_step_s": step_total / len(steps),
        "compute_share": compute_total / step_total if step_total > 0 else 0.0,
        "wait_share": wait_total / step_total if step_total > 0 else 0.0,
        "wait_by_phase": {
            phase: blame.get(phase, 0.0) / wait_total if wait_total > 0 else 0.0
            for phase in PHASES
            if phase != "learner_wait"
        },
        "wait_unattributed": unattributed / wait_total if wait_total > 0 else 0.0,
    }


def _bottleneck(
    phases: Mapping[str, Mapping[str, float]],
    actors: Mapping[str, Mapping[str, Sequence[float]]],
    critical: Mapping[str, Any] | None,
) -> str:
    parts: list[str] = []
    if critical is not None and critical["steps"]:
        if critical["compute_share"] >= 0.5:
            parts.append(
                f"the learner's own compute ({critical['compute_share']:.0%} of each step): "
                "rollouts wait for it"
            )
        else:
            phase, share = max(critical["wait_by_phase"].items(), key=lambda item: item[1])
            parts.append(
                f"the learner waits {critical['wait_share']:.0%} of each step, "
                f"mostly on {phase} ({share:.0%} of the wait)"
            )
    elif phases and any(figures["total_s"] > 0 for figures in phases.values()):
        phase, figures = max(phases.items(), key=lambda item: item[1]["share"])
        parts.append(
            f"{phase}: {figures['share']:.0%} of rollout time (p50 {_seconds(figures['p50'])})"
        )
    saturated = _saturated(actors)
    if saturated:
        parts.append("saturated: " + ", ".join(saturated))
    return "; ".join(parts) if parts else "nothing measured"


def _saturated(actors: Mapping[str, Mapping[str, Sequence[float]]]) -> list[str]:
    out = []
    for group, entry in sorted(actors.items()):
        busy = list(entry["busy"])
        mean = sum(busy) / len(busy) if busy else 0.0
        if mean >= SATURATED:
            out.append(f"{group} (busy {mean:.0%})")
    return out


def _seconds(value: float) -> str:
    return f"{value * 1e3:.1f} ms" if value < 1.0 else f"{value:.2f} s"
