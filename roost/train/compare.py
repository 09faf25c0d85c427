"""`roost compare`: held-out figures of several runs side by side, and the spread of RL's gain.

One RL phase is one draw. From a single SFT checkpoint the default's sampled gain has ranged
over several points on one machine (docs/training-log.md), so a setting is judged by several runs,
not one. Runs that share a warm start (equal after-SFT figures on equal held-out tasks) are
pooled: the mean gain, its standard deviation and a 95 % confidence interval for the mean
(Student's t) say what the setting does and how sure that is. Runs of several warm starts
(another seed draws other evaluation samples, so its after-SFT figure differs) are also pooled
all together: each gain is measured against its own run's warm start, so the gains of one
setting are draws of one quantity whichever warm start they came from.
"""

from __future__ import annotations

import json
import math
import statistics
from collections.abc import Sequence
from pathlib import Path
from typing import Annotated

import msgspec

__all__ = [
    "CompareError",
    "GainStats",
    "PoolStats",
    "RunFigures",
    "gain_stats",
    "load_run_figures",
    "pool_all",
    "pool_by_warm_start",
    "pool_stats",
    "t975",
]

# Two-sided 95 % quantiles of Student's t for 1..30 degrees of freedom (beyond: `t975`).
_T975 = (
    12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228,
    2.201, 2.179, 2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086,
    2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042,
)  # fmt: skip


_STAGES = ("after_sft", "after_rl")

#: A pass rate is a fraction; NaN and values outside [0, 1] are a corrupted summary, and a
#: figure made from them would look like any other.
_Fraction = Annotated[float, msgspec.Meta(ge=0.0, le=1.0)]
#: Counts, seconds and errors are never negative (NaN is refused too).
_NonNegative = Annotated[float, msgspec.Meta(ge=0.0)]


class CompareError(Exception):
    """A run directory that cannot be compared (no summary, or a malformed one)."""


class PassRate(msgspec.Struct, frozen=True):
    greedy: _Fraction | None  # null for a split without tasks (no test-only levels, say)
    sampled: _Fraction | None


class HeldOut(msgspec.Struct, frozen=True):
    all: PassRate
    demo_levels: PassRate | None = None
    test_only_levels: PassRate | None = None


class Throughput(msgspec.Struct, frozen=True):
    rollouts_per_s: _NonNegative = 0.0


class _Summary(msgspec.Struct, frozen=True):
    """The part of summary.json a comparison reads (other keys are ignored)."""

    heldout_pass_rate_after_sft: HeldOut | None
    heldout_pass_rate_after_rl: HeldOut | None
    heldout_pass_rate_sft_only_control: HeldOut | None = None
    name: str = ""
    versions: Annotated[int, msgspec.Meta(ge=0)] = 0
    wall_seconds: _NonNegative = 0.0
    heldout_tasks: Annotated[int, msgspec.Meta(ge=0)] = 0
    throughput: Throughput = Throughput()
    heldout_by_level: dict[str, dict[str, PassRate] | None] = {}
    heldout_sampled_se: dict[str, dict[str, _NonNegative | None] | None] = {}


class RunFigures(msgspec.Struct, frozen=True):
    """One run's figures as a comparison shows them (pass rates as fractions)."""

    run: str
    name: str
    versions: int
    wall_seconds: float
    rollouts_per_s: float
    heldout_tasks: int
    after_sft: HeldOut | None
    after_rl: HeldOut | None
    control: HeldOut | None
    sampled_by_level: dict[str, tuple[float | None, float | None]]  # level: (SFT, RL)
    #: The sampling standard errors of the sampled figure (all levels, points) after SFT and
    #: after RL. None if not recorded.
    stage_se: tuple[float, float] | None = None

    @property
    def gain_se(self) -> float | None:
        """The sampling standard error of RL's sampled gain (points): the part of this run's
        gain that evaluating the same weights again would move. None if not recorded."""
        return None if self.stage_se is None else math.hypot(*self.stage_se)

    def gain(self, mode: str) -> float | None:
        """RL's change over the after-SFT checkpoint, all levels, in points."""
        if self.after_sft is None or self.after_rl is None:
            return None
        return _points(self.after_rl.all, self.after_sft.all, mode)

    def over_control(self, mode: str) -> float | None:
        """RL minus the SFT-only control on the test-only levels, in points."""
        rl, control = self.after_rl, self.control
        if rl is None or control is None:
            return None
        if rl.test_only_levels is None or control.test_only_levels is None:
            return None
        return _points(rl.test_only_levels, control.test_only_levels, mode)


def _points(after: PassRate, before: PassRate, mode: str) -> float | None:
    """after - before in points, for one decoding mode (None where either has no tasks)."""
    if mode not in ("greedy", "sampled"):
        raise ValueError(f"mode: 'greedy' or 'sampled', got {mode!r}")
    a, b = (after.greedy, before.greedy) if mode == "greedy" else (after.sampled, before.sampled)
    return None if a is None or b is None else 100 * (a - b)


class GainStats(msgspec.Struct, frozen=True):
    """The mean of `n` gains, their standard deviation and the 95 % interval of the mean
    (`sd` and the interval are None for a single run)."""

    n: int
    mean: float
    sd: float | None
    low: float | None
    high: float | None
    #: The evaluation sampling error that differs from run to run, as a standard deviation
    #: (the root mean square of the errors `gain_stats` was given): the part of `sd` that more
    #: draws per task would remove. None if a run lacks it, or for statistics other than the
    #: sampled gain.
    eval_sd: float | None = None


def _rms(values: Sequence[float | None], n: int) -> float | None:
    """The root mean square of `values`, or None unless all `n` of them are known."""
    known = [v for v in values if v is not None]
    return math.sqrt(statistics.fmean(v * v for v in known)) if known and len(known) == n else None


def gain_stats(gains: Sequence[float], errors: Sequence[float | None] = ()) -> GainStats | None:
    """Mean, sample standard deviation and Student's-t 95 % interval of `gains`; with each
    gain's evaluation standard error in `errors`, also their root mean square.

    :raises ValueError: a gain that is NaN or infinite (it would turn every figure into NaN).
    """
    if not gains:
        return None
    if not all(math.isfinite(gain) for gain in gains):
        raise ValueError(f"gains: must be finite numbers, got {list(gains)}")
    n, mean = len(gains), statistics.fmean(gains)
    eval_sd = _rms(errors, n)
    if n == 1:
        return GainStats(n=1, mean=mean, sd=None, low=None, high=None, eval_sd=eval_sd)
    sd = statistics.stdev(gains)
    half = t975(n - 1) * sd / math.sqrt(n)
    return GainStats(n=n, mean=mean, sd=sd, low=mean - half, high=mean + half, eval_sd=eval_sd)


def t975(df: int) -> float:
    """The two-sided 95 % quantile of Student's t with `df` degrees of freedom: the table to
    30, then the Cornish-Fisher expansion about the normal's 1.960 (within 0.001 there; the
    normal's quantile alone would narrow the interval by 4 % at 31)."""
    if df < 1:
        raise ValueError(f"df: must be >= 1, got {df}")
    if df <= len(_T975):
        return _T975[df - 1]
    z = 1.959964
    return z + (z**3 + z) / (4 * df) + (5 * z**5 + 16 * z**3 + 3 * z) / (96 * df**2)


def load_run_figures(run_dir: Path) -> RunFigures:
    """Read `run_dir/summary.json`; a missing or malformed one raises CompareError naming it."""
    if not run_dir.is_dir():
        raise CompareError(f"{run_dir}: not a run directory")
    path = run_dir / "summary.json"
    try:
        raw = path.read_bytes()
    except OSError as exc:
        reason = f"no summary ({exc.strerror}); `roost report` rebuilds it from the run's log"
        raise CompareError(f"{path}: {reason}") from None
    # Python's json, not msgspec's: summary.json is written by `json.dumps`, which writes
    # NaN for a figure a comparison never reads (a diverged SFT loss, say); msgspec refuses
    # the whole file for it. The figures read are validated below, NaN refused there.
    try:
        data = json.loads(raw)
    except (ValueError, RecursionError) as exc:  # JSONDecodeError, bytes that are not UTF-8
        raise CompareError(f"{path}: not JSON ({exc})") from None
    try:
        summary = msgspec.convert(data, type=_Summary)
    except msgspec.ValidationError as exc:
        raise CompareError(f"{path}: {exc}") from None
    levels = summary.heldout_by_level
    se = [(summary.heldout_sampled_se.get(stage) or {}).get("all") for stage in _STAGES]
    sft, rl = levels.get("after_sft") or {}, levels.get("after_rl") or {}
    return RunFigures(
        run=str(run_dir),
        name=summary.name,
        versions=summary.versions,
        wall_seconds=summary.wall_seconds,
        rollouts_per_s=summary.throughput.rollouts_per_s,
        heldout_tasks=summary.heldout_tasks,
        after_sft=summary.heldout_pass_rate_after_sft,
        after_rl=summary.heldout_pass_rate_after_rl,
        control=summary.heldout_pass_rate_sft_only_control,
        sampled_by_level={
            level: (
                sft[level].sampled if level in sft else None,
                rl[level].sampled if level in rl else None,
            )
            for level in sorted({*sft, *rl}, key=_level_order)
        },
        stage_se=None if None in se else (100 * (se[0] or 0.0), 100 * (se[1] or 0.0)),
    )


def _level_order(level: str) -> tuple[int, str]:
    return (int(level), "") if level.isdigit() else (1 << 30, level)


def pool_by_warm_start(runs: Sequence[RunFigures]) -> list[list[RunFigures]]:
    """Runs grouped by their warm start (equal after-SFT figures, by level too, and equal
    held-out task counts), in the order each group first appears; runs without both
    evaluations are left out."""
    groups: dict[tuple[object, ...], list[RunFigures]] = {}
    for run in runs:
        if run.after_sft is None or run.after_rl is None:
            continue
        key = (
            run.heldout_tasks,
            run.after_sft.all.greedy,
            run.after_sft.all.sampled,
            tuple((level, sft) for level, (sft, _) in run.sampled_by_level.items()),
        )
        groups.setdefault(key, []).append(run)
    return list(groups.values())


class PoolStats(msgspec.Struct, frozen=True):
    """Runs pooled: RL's gain and its margin over the control."""

    runs: list[str]
    after_sft: HeldOut | None  # the warm start's figures; None for runs of several
    gain_greedy: GainStats | None
    gain_sampled: GainStats | None  # the only one with the runs' evaluation error
    over_control_greedy: GainStats | None
    over_control_sampled: GainStats | None
    #: The warm start's own evaluation error (sampled, all levels, points; the root mean
    #: square over the runs). Its runs share that evaluation, the same weights and draws, so
    #: it moves every gain of the pool alike: it adds nothing to their spread, and more runs
    #: do not shrink it. None for runs of several warm starts, or if a run lacks it.
    baseline_se: float | None = None


def pool_stats(pool: Sequence[RunFigures]) -> PoolStats:
    """The statistics of one group from `pool_by_warm_start` (each run has both evaluations)."""
    return _pooled(pool, pool[0].after_sft)


def pool_all(pools: Sequence[Sequence[RunFigures]]) -> PoolStats | None:
    """The runs of all groups from `pool_by_warm_start` pooled, whatever their warm start;
    None for fewer than two groups (a single group's `pool_stats` then says it all)."""
    if len(pools) < 2:
        return None
    return _pooled([run for pool in pools for run in pool], None)


def _pooled(pool: Sequence[RunFigures], after_sft: HeldOut | None) -> PoolStats:
    def pooled(values: Sequence[float | None]) -> GainStats | None:
        return gain_stats([v for v in values if v is not None])

    one_start = after_sft is not None
    # One warm start: only the after-RL evaluation differs between runs. Several: which runs
    # share an after-SFT evaluation varies, so no single figure says what evaluation adds.
    sampled = [
        (run.gain("sampled"), run.stage_se[1] if one_start and run.stage_se else None)
        for run in pool
    ]
    baseline = [run.stage_se[0] if run.stage_se else None for run in pool]
    return PoolStats(
        runs=[run.run for run in pool],
        after_sft=after_sft,
        gain_greedy=pooled([run.gain("greedy") for run in pool]),
        gain_sampled=gain_stats(
            [g for g, _ in sampled if g is not None], [e for g, e in sampled if g is not None]
        ),
        over_control_greedy=pooled([run.over_control("greedy") for run in pool]),
        over_control_sampled=pooled([run.over_control("sampled") for run in pool]),
        baseline_se=_rms(baseline, len(baseline)) if one_start else None,
    )
