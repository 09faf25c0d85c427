"""Curriculum: which difficulty comes next, so that the training mix stays learnable.

A group of samples that all pass or all fail gives a group-relative advantage of zero: no
learning signal (DAPO's dynamic sampling). So the curriculum keeps the success rate of the mix
inside a target band, drops zero-variance groups before they reach the learner (the caller draws
a replacement), and reports tasks that are too easy, too hard or flaky.

Estimates are exponentially decayed counts (`decay` per observation of that level or task), so
they follow a learner whose skill grows. Sampling gives every level whose estimate lies in the
band full weight and its neighbours a little (`explore`) to keep them measured; if no level is
in the band, the nearest level on each side are mixed so that the expected rate is the band's
centre. All state lives in `CurriculumState`, a msgspec struct that a learner checkpoints
with its weights.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence

import msgspec

__all__ = [
    "Curriculum",
    "CurriculumConfig",
    "CurriculumReport",
    "CurriculumState",
    "RateStats",
    "collect_groups",
]


class CurriculumConfig(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """`band`: the target success rate of the mix, (low, high). `decay`: weight kept by old
    observations at each new one. `min_attempts`: observations before a task is reported."""

    levels: int = 7
    band: tuple[float, float] = (0.3, 0.7)
    decay: float = 0.98
    explore: float = 0.05
    too_easy: float = 0.95
    too_hard: float = 0.05
    min_attempts: int = 8
    max_tracked_tasks: int = 100_000

    def __post_init__(self) -> None:
        low, high = self.band
        if not 0.0 <= low < high <= 1.0:
            raise ValueError(f"band: need 0 <= low < high <= 1, got {self.band}")
        if self.levels < 1:
            raise ValueError(f"levels: must be >= 1, got {self.levels}")
        if not 0.0 < self.decay <= 1.0:
            raise ValueError(f"decay: must be in (0, 1], got {self.decay}")
        if not 0.0 <= self.explore < 1.0:
            raise ValueError(f"explore: must be in [0, 1), got {self.explore}")
        if not 0.0 <= self.too_hard < self.too_easy <= 1.0:
            raise ValueError(
                f"too_hard, too_easy: need 0 <= too_hard < too_easy <= 1, "
                f"got {self.too_hard}, {self.too_easy}"
            )
        if self.min_attempts < 0:
            raise ValueError(f"min_attempts: must be >= 0, got {self.min_attempts}")
        # At 0, `record` would evict from an empty table (StopIteration) on the first task.
        if self.max_tracked_tasks < 1:
            raise ValueError(f"max_tracked_tasks: must be >= 1, got {self.max_tracked_tasks}")


class RateStats(msgspec.Struct, kw_only=True):
    """Decayed success counts (`passes` of `attempts`), and raw totals."""

    attempts: float = 0.0
    passes: float = 0.0
    total: int = 0
    total_passes: int = 0

    def add(self, passed: bool, decay: float) -> None:
        self.attempts = self.attempts * decay + 1.0
        self.passes = self.passes * decay + (1.0 if passed else 0.0)
        self.total += 1
        self.total_passes += int(passed)

    @property
    def observed(self) -> float:
        """The raw pass rate over every observation (0 before any)."""
        return self.total_passes / self.total if self.total else 0.0

    @property
    def rate(self) -> float:
        """Posterior mean with a uniform prior: 0.5 before any observation."""
        return (self.passes + 1.0) / (self.attempts + 2.0)


class TaskRecord(msgspec.Struct, kw_only=True):
    level: int
    stats: RateStats = msgspec.field(default_factory=RateStats)
    verdicts: dict[str, bool] = msgspec.field(default_factory=dict)  # solution digest -> passed
    flaky: bool = False


class CurriculumState(msgspec.Struct, kw_only=True):
    """Everything the curriculum knows; `msgspec.json.encode` it to checkpoint."""

    levels: dict[int, RateStats] = msgspec.field(default_factory=dict)
    tasks: dict[str, TaskRecord] = msgspec.field(default_factory=dict)
    groups_seen: int = 0
    groups_dropped: int = 0
    #: The level sampler's generator (`random.Random.getstate()`) after the latest draw; None
    #: before any, when `seed` alone decides the draws.
    rng: tuple[int, tuple[int, ...], float | None] | None = None


class CurriculumReport(msgspec.Struct, frozen=True, kw_only=True):
    level_rates: dict[int, float]
    mix_rate: float
    too_easy: list[str]
    too_hard: list[str]
    flaky: list[str]
    groups_seen: int
    groups_dropped: int


class Curriculum:
    """Per-level and per-task success statistics, and level sampling that holds the band."""

    def __init__(
        self,
        config: CurriculumConfig | None = None,
        *,
        seed: int = 0,
        state: CurriculumState | None = None,
    ) -> None:
        """`state`: resume from it; its saved generator, if any, takes over from `seed`."""
        self.config = config or CurriculumConfig()
        self.state = state or CurriculumState()
        self._rng = random.Random(seed)
        if self.state.rng is not None:
            self._rng.setstate(self.state.rng)

    # -- statistics -------------------------------------------------------------------------

    def record(
        self, task_id: str, level: int, passed: bool, *, solution: str | None = None
    ) -> None:
        """One scored sample. `solution` (a digest of the answer) lets the curriculum see a
        verdict that changes for the same answer: a flaky task."""
        self._level(level).add(passed, self.config.decay)
        record = self.state.tasks.get(task_id)
        if record is None:
            if len(self.state.tasks) >= self.config.max_tracked_tasks:
                self.state.tasks.pop(next(iter(self.state.tasks)))  # forget the oldest
            record = self.state.tasks[task_id] = TaskRecord(level=level)
        record.stats.add(passed, self.config.decay)
        if solution is not None:
            before = record.verdicts.setdefault(solution, passed)
            record.flaky = record.flaky or before != passed

    def admit_group(self, task_id: str, level: int, outcomes: Sequence[bool]) -> bool:
        """Record a group of samples of one task; False when they all pass or all fail (no
        signal: drop the group and draw a replacement)."""
        for passed in outcomes:
            self.record(task_id, level, passed)
        self.state.groups_seen += 1
        if len(set(outcomes)) < 2:
            self.state.groups_dropped += 1
            return False
        return True

    def level_rate(self, level: int) -> float:
        return self._level(level).rate

    # -- sampling ---------------------------------------------------------------------------

    def weights(self) -> dict[int, float]:
        """The probability of each level in the next draw."""
        low, high = self.config.band
        levels = range(1, self.config.levels + 1)
        rate = {lv: self.level_rate(lv) for lv in levels if self._level(lv).total > 0}
        raw = dict.fromkeys(levels, 0.0)
        inside = [lv for lv, r in rate.items() if low <= r <= high]
        for lv in inside:
            raw[lv] = 1.0
        if not inside:
            # Mix the hardest level above the band with the easiest below it so that the
            # expected rate is the band's centre; with only one side known, use its nearest.
            easy = max((lv for lv, r in rate.items() if r > high), default=None)
            hard = min((lv for lv, r in rate.items() if r < low), default=None)
            if easy is not None and hard is not None:
                centre = (low + high) / 2
                share = (centre - rate[hard]) / (rate[easy] - rate[hard])
                raw[easy], raw[hard] = share, 1.0 - share
            elif easy is not None:
                raw[easy] = 1.0
            elif hard is not None:
                raw[hard] = 1.0
            else:
                raw[1] = 1.0
        # Keep the neighbours of the chosen levels measured (the band moves as skill grows).
        chosen = [lv for lv, w in raw.items() if w > 0]
        for lv in {n for c in chosen for n in (c - 1, c + 1) if n in raw and raw[n] == 0.0}:
            raw[lv] = self.config.explore
        total = sum(raw.values())
        return {lv: w / total for lv, w in raw.items()}

    def sample_level(self) -> int:
        weights = self.weights()
        level = self._rng.choices(list(weights), weights=list(weights.values()))[0]
        # Kept in the state, so that a resumed run draws what an uninterrupted one would
        # have, not the seed's first draws again.
        self.state.rng = self._rng.getstate()
        return level

    def mix_rate(self) -> float:
        """The expected success rate of the mix the next draws will give."""
        return sum(w * self.level_rate(lv) for lv, w in self.weights().items())

    # -- reporting --------------------------------------------------------------------------

    def report(self) -> CurriculumReport:
        cfg = self.config
        ripe = {k: r for k, r in self.state.tasks.items() if r.stats.total >= cfg.min_attempts}
        return CurriculumReport(
            level_rates={lv: round(self.level_rate(lv), 4) for lv in range(1, cfg.levels + 1)},
            mix_rate=self.mix_rate(),
            too_easy=sorted(k for k, r in ripe.items() if r.stats.observed >= cfg.too_easy),
            too_hard=sorted(k for k, r in ripe.items() if r.stats.observed <= cfg.too_hard),
            flaky=sorted(k for k, r in self.state.tasks.items() if r.flaky),
            groups_seen=self.state.groups_seen,
            groups_dropped=self.state.groups_dropped,
        )

    def to_bytes(self) -> bytes:
        return msgspec.json.encode(self.state)

    @classmethod
    def from_bytes(
        cls, data: bytes, config: CurriculumConfig | None = None, *, seed: int = 0
    ) -> Curriculum:
        """:raises msgspec.ValidationError: naming the field when `data` is not a state."""
        return cls(config, seed=seed, state=msgspec.json.decode(data, type=CurriculumState))

    def _level(self, level: int) -> RateStats:
        if not 1 <= level <= self.config.levels:
            raise ValueError(f"level: must be in 1..{self.config.levels}, got {level}")
        stats = self.state.levels.get(level)
        if stats is None:
            stats = self.state.levels[level] = RateStats()
        return stats


def collect_groups(
    curriculum: Curriculum,
    rollout: Callable[[int], tuple[str, list[bool]]],
    groups: int,
    *,
    max_draws: int | None = None,
) -> list[tuple[str, list[bool]]]:
    """Draw levels and roll out groups until `groups` of them carry signal; zero-variance ones
    are recorded, dropped and replaced. `rollout(level)` returns (task id, outcomes). Stops
    after `max_draws` (default 20 x groups) so a learner that passes everything cannot spin."""
    kept: list[tuple[str, list[bool]]] = []
    limit = max_draws if max_draws is not None else 20 * groups
    for _ in range(limit):
        if len(kept) == groups:
            break
        level = curriculum.sample_level()
        task_id, outcomes = rollout(level)
        if curriculum.admit_group(task_id, level, outcomes):
            kept.append((task_id, outcomes))
    return kept
