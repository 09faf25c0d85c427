"""`RewardMonitor`: running reward statistics per task group, and alarms on abnormal shifts.

Each group keeps its last `window` observations and a slow baseline built from the
observations that left that window (so the baseline is the history before the recent past).
Three shifts raise an alarm once, and again only after the condition has cleared:

- `pass_rate_jump`: the recent pass rate is above the baseline by more than `jump` (a learner
  rarely improves that fast; a broken or forged verifier does);
- `length_collapse`: the recent mean output length fell below `collapse` x the baseline (the
  policy found a degenerate short answer);
- `evaluation_failure_spike`: the recent rate of evaluation failures is above `spike`, and
  above three times the baseline rate.
"""

from __future__ import annotations

import collections
import dataclasses
from typing import Literal

import msgspec

__all__ = ["Alarm", "AlarmKind", "GroupStatistics", "MonitorConfig", "RewardMonitor"]

AlarmKind = Literal["pass_rate_jump", "length_collapse", "evaluation_failure_spike"]


class MonitorConfig(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    window: int = 50
    baseline_alpha: float = 0.02
    min_baseline: int = 50  # observations in the baseline before it is trusted
    jump: float = 0.35
    collapse: float = 0.5
    spike: float = 0.2


class Alarm(msgspec.Struct, frozen=True, kw_only=True):
    kind: AlarmKind
    group: str
    recent: float
    baseline: float
    detail: str


class GroupStatistics(msgspec.Struct, frozen=True, kw_only=True):
    observations: int
    recent_pass_rate: float
    baseline_pass_rate: float | None
    recent_mean_length: float
    baseline_mean_length: float | None
    recent_evaluation_failure_rate: float


@dataclasses.dataclass
class _Group:
    recent: collections.deque[tuple[bool, int, bool]]
    base_pass: float = 0.0
    base_length: float = 0.0
    base_eval: float = 0.0
    base_count: int = 0
    observations: int = 0
    raised: set[str] = dataclasses.field(default_factory=set)


class RewardMonitor:
    """Feed it every scored sample with `observe`; it returns the alarms that sample raised."""

    def __init__(self, config: MonitorConfig | None = None) -> None:
        self.config = config or MonitorConfig()
        self._groups: dict[str, _Group] = {}

    def observe(
        self, group: str, *, passed: bool, length: int, evaluation_failed: bool
    ) -> list[Alarm]:
        cfg = self.config
        state = self._groups.get(group)
        if state is None:
            state = self._groups[group] = _Group(collections.deque(maxlen=cfg.window))
        if len(state.recent) == cfg.window:
            old_pass, old_len, old_eval = state.recent[0]
            a = cfg.baseline_alpha if state.base_count else 1.0
            state.base_pass += a * (float(old_pass) - state.base_pass)
            state.base_length += a * (old_len - state.base_length)
            state.base_eval += a * (float(old_eval) - state.base_eval)
            state.base_count += 1
        state.recent.append((passed, length, evaluation_failed))
        state.observations += 1
        if state.base_count < cfg.min_baseline or len(state.recent) < cfg.window:
            return []
        stats = self._stats(state)
        assert stats.baseline_pass_rate is not None
        assert stats.baseline_mean_length is not None
        checks: list[tuple[AlarmKind, bool, float, float, str]] = [
            (
                "pass_rate_jump",
                stats.recent_pass_rate - stats.baseline_pass_rate > cfg.jump,
                stats.recent_pass_rate,
                stats.baseline_pass_rate,
                "pass rate rose abruptly",
            ),
            (
                "length_collapse",
                stats.recent_mean_length < cfg.collapse * stats.baseline_mean_length,
                stats.recent_mean_length,
                stats.baseline_mean_length,
                "output length collapsed",
            ),
            (
                "evaluation_failure_spike",
                stats.recent_evaluation_failure_rate > max(cfg.spike, 3 * state.base_eval),
                stats.recent_evaluation_failure_rate,
                state.base_eval,
                "evaluation failures spiked",
            ),
        ]
        alarms = []
        for kind, firing, recent, baseline, detail in checks:
            if firing and kind not in state.raised:
                state.raised.add(kind)
                alarms.append(
                    Alarm(
                        kind=kind,
                        group=group,
                        recent=recent,
                        baseline=baseline,
                        detail=f"{detail}: {recent:.3g} against {baseline:.3g}",
                    )
                )
            elif not firing:
                state.raised.discard(kind)
        return alarms

    def statistics(self, group: str) -> GroupStatistics | None:
        state = self._groups.get(group)
        return None if state is None else self._stats(state)

    def groups(self) -> list[str]:
        return sorted(self._groups)

    def _stats(self, state: _Group) -> GroupStatistics:
        n = len(state.recent) or 1
        trusted = state.base_count >= self.config.min_baseline
        return GroupStatistics(
            observations=state.observations,
            recent_pass_rate=sum(p for p, _, _ in state.recent) / n,
            baseline_pass_rate=state.base_pass if trusted else None,
            recent_mean_length=sum(ln for _, ln, _ in state.recent) / n,
            baseline_mean_length=state.base_length if trusted else None,
            recent_evaluation_failure_rate=sum(e for _, _, e in state.recent) / n,
        )
