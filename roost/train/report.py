"""The report of a training run: PNG plots and one HTML page, rebuilt from the run's files.

`build_report(run_dir)` reads `config.toml`, `progress.json`, `trajectories.log` and
`metrics.jsonl`, rewrites `summary.json`, and writes `report.html` next to the plots.
"""

from __future__ import annotations

import collections
import html
import json
import math
import statistics
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

from roost.figures import save_figure
from roost.profile.sources import ProfileInputError, read_jsonl
from roost.train.config import ConfigError, load_train_config
from roost.train.lineage import trace_lineage
from roost.train.profile_export import export_profile_inputs
from roost.train.records import StepRecord, TrajectoryRecord
from roost.train.rundir import CorruptProgressError, RunDir
from roost.train.summary import load_run_records, write_summary

__all__ = ["PLOTS", "ReportError", "build_report"]

PLOTS = (
    "pass_rate_over_time.png",
    "pass_rate_over_versions.png",
    "heldout.png",
    "throughput.png",
    "latency.png",
    "staleness.png",
    "pool.png",
    "failures.png",
)


class ReportError(RuntimeError):
    """The directory is not a training run (no config.toml), or its files are unreadable."""


def build_report(run_dir: Path) -> Path:
    """Rewrite summary.json, the plots and report.html of `run_dir`; returns the report's path.

    :raises ReportError: no config.toml, or a config, progress.json or metrics.jsonl that
        cannot be read (the message names the file).
    """
    run = RunDir(run_dir)
    if not run.config.exists():
        raise ReportError(f"{run_dir}: no config.toml; not a roost train run directory")
    try:
        config = load_train_config(run.config)
        progress = run.read_progress()
    except (ConfigError, CorruptProgressError) as exc:
        raise ReportError(str(exc)) from None
    metrics = _read_metrics(run.metrics)
    summary = write_summary(run, config, progress, metrics[-1] if metrics else {})
    records, _ = load_run_records(run)
    export_profile_inputs(run, records)
    lineage = trace_lineage(records)
    trajectories, steps = lineage.trajectories, lineage.steps
    _over_time(run.root / PLOTS[0], trajectories)
    _over_versions(run.root / PLOTS[1], steps)
    _heldout(run.root / PLOTS[2], summary)
    _throughput(run.root / PLOTS[3], trajectories)
    _latency(run.root / PLOTS[4], trajectories)
    _bars(run.root / PLOTS[5], summary["staleness_histogram"], "staleness (versions)", "samples")
    _pool(run.root / PLOTS[6], metrics)
    _bars(run.root / PLOTS[7], summary["failures_by_kind"], "failure kind", "rollouts")
    run.report.write_text(_page(config.name, summary))
    return run.report


def _read_metrics(path: Path) -> list[dict[str, Any]]:
    """The snapshots of metrics.jsonl; a torn last line (a crash mid-write) is dropped.

    :raises ReportError: any other line that is not a snapshot, naming the file and line
        (the writer cuts a torn line before it appends on resume, so this is corruption).
    """
    if not path.exists():
        return []
    try:
        return read_jsonl(path, _snapshot)
    except ProfileInputError as exc:
        raise ReportError(str(exc)) from None


def _snapshot(line: bytes) -> dict[str, Any]:
    """One metrics line, with the keys the report computes with checked."""
    value = json.loads(line)
    if not isinstance(value, dict):
        raise ValueError(f"expected a JSON object, got {type(value).__name__}")
    for key in ("t", "pool.busy", "pool.total"):
        item = value.get(key)
        if item is None and key != "t":
            continue  # a snapshot taken before the pool existed
        if isinstance(item, bool) or not isinstance(item, int | float) or not math.isfinite(item):
            raise ValueError(f"{key}: expected a finite number, got {item!r}")
    if not isinstance(value.get("loop_lag_s") or {}, dict):
        raise ValueError(f"loop_lag_s: expected a histogram object, got {value['loop_lag_s']!r}")
    return value


def _rolling(values: list[float], window: int = 64) -> list[float]:
    out, total = [], 0.0
    for i, v in enumerate(values):
        total += v
        if i >= window:
            total -= values[i - window]
        out.append(total / min(i + 1, window))
    return out


def _over_time(path: Path, trajectories: list[TrajectoryRecord]) -> None:
    scored = sorted((r for r in trajectories if r.status == "scored"), key=lambda r: r.wall)
    fig, ax = plt.subplots(figsize=(6, 3.2))
    if scored:
        t0 = scored[0].wall
        xs = [(r.wall - t0) / 60 for r in scored]
        ax.plot(xs, _rolling([float(r.passed) for r in scored]), label="pass rate")
        ax.plot(xs, _rolling([r.reward for r in scored]), label="reward")
        ax.legend()
    ax.set_xlabel("minutes into RL")
    ax.set_title("training episodes (rolling mean of 64)")
    save_figure(fig, path, dpi=90)


def _over_versions(path: Path, steps: list[StepRecord]) -> None:
    fig, ax = plt.subplots(figsize=(6, 3.2))
    if steps:
        ax.plot([s.version for s in steps], [s.pass_rate for s in steps], label="pass rate")
        ax.plot([s.version for s in steps], [s.reward_mean for s in steps], label="reward")
        ax.legend()
    ax.set_xlabel("policy version")
    ax.set_title("episodes consumed by each learner step")
    save_figure(fig, path, dpi=90)


def _heldout(path: Path, summary: dict[str, Any]) -> None:
    stages = [
        s
        for s in ("after_sft", "after_rl", "sft_only_control")
        if summary[f"heldout_pass_rate_{s}"]
    ]
    splits = ("all", "demo_levels", "test_only_levels")
    fig, axes = plt.subplots(1, 2, figsize=(8, 3.2), sharey=True)
    top = 0.0
    for ax, mode in zip(axes, ("greedy", "sampled"), strict=True):
        width = 0.8 / max(1, len(stages))
        for i, stage in enumerate(stages):
            result = summary[f"heldout_pass_rate_{stage}"]
            raw = [result[s][mode] for s in splits]
            values = [v or 0.0 for v in raw]
            bars = ax.bar([j + i * width for j in range(len(splits))], values, width, label=stage)
            ax.bar_label(bars, labels=[_pct(v) for v in raw], fontsize=7)
            top = max(top, *values)
        ax.set_xticks([j + 0.4 - width / 2 for j in range(len(splits))], splits, fontsize=8)
        ax.set_title(f"held-out pass rate, {mode}")
    for ax in axes:
        ax.set_ylim(0, min(1.0, max(0.1, top * 1.25)))
    if stages:  # a run stopped before its first evaluation has no bars to name
        axes[0].legend(fontsize=8)
    else:
        axes[0].set_title("no held-out evaluation yet")
    save_figure(fig, path, dpi=90)


def _throughput(path: Path, trajectories: list[TrajectoryRecord]) -> None:
    walls = sorted(r.wall for r in trajectories if r.status == "scored")
    fig, ax = plt.subplots(figsize=(6, 3.2))
    if walls:
        bins = collections.Counter(int((w - walls[0]) // 10) for w in walls)
        xs = range(max(bins) + 1)
        ax.plot([x * 10 / 60 for x in xs], [bins.get(x, 0) / 10 for x in xs])
    ax.set_xlabel("minutes into RL")
    ax.set_ylabel("scored rollouts / s")
    ax.set_title("throughput (10 s bins)")
    save_figure(fig, path, dpi=90)


def _latency(path: Path, trajectories: list[TrajectoryRecord]) -> None:
    phases = {
        "queue wait": [r.queue_wait_s for r in trajectories if r.status == "scored"],
        "acquire": [r.acquire_s for r in trajectories if r.status == "scored"],
        "generate": [t.generate_s for r in trajectories for t in r.turns],
        "exec (tests)": [t.exec_s for r in trajectories for t in r.turns if not t.reused],
        "learner wait": [r.learner_wait_s for r in trajectories if r.learner_wait_s is not None],
    }
    fig, ax = plt.subplots(figsize=(7, 3.2))
    names = [n for n, v in phases.items() if len(v) >= 2]
    for i, q in enumerate((50, 90, 99)):
        values = [statistics.quantiles(phases[n], n=100)[q - 1] for n in names]
        ax.bar([j + i * 0.27 for j in range(len(names))], values, 0.27, label=f"p{q}")
    ax.set_xticks([j + 0.27 for j in range(len(names))], names, fontsize=8)
    ax.set_ylabel("seconds")
    ax.set_yscale("log")
    ax.set_title("latency percentiles by phase (per turn; exec: turns run, not reused)")
    if names:  # fewer than two timings in every phase: no bars to name
        ax.legend(fontsize=8)
    save_figure(fig, path, dpi=90)


def _bars(path: Path, counts: dict[str, int], xlabel: str, ylabel: str) -> None:
    fig, ax = plt.subplots(figsize=(5, 3.2))
    keys = list(counts)
    ax.bar(range(len(keys)), [counts[k] for k in keys])
    ax.set_xticks(range(len(keys)), keys, fontsize=8, rotation=20)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    if not keys:
        ax.set_title("none")
    save_figure(fig, path, dpi=90)


def _pool(path: Path, metrics: list[dict[str, Any]]) -> None:
    fig, ax = plt.subplots(figsize=(6, 3.2))
    if metrics:
        t0 = metrics[0]["t"]
        xs = [(m["t"] - t0) / 60 for m in metrics]
        ax.plot(xs, [m.get("pool.busy") or 0 for m in metrics], label="busy")
        ax.plot(xs, [m.get("pool.total") or 0 for m in metrics], label="alive")
        ax.legend()
    ax.set_xlabel("minutes")
    ax.set_title("sandbox pool")
    save_figure(fig, path, dpi=90)


def _page(name: str, summary: dict[str, Any]) -> str:
    rows = []
    for stage in ("after_sft", "after_rl", "sft_only_control"):
        result = summary[f"heldout_pass_rate_{stage}"]
        if not result:
            continue
        errors = (summary.get("heldout_sampled_se") or {}).get(stage) or {}
        cells = "".join(
            f"<td>{_pct(result[s]['greedy'])} / {_pct(result[s]['sampled'])}"
            f"{_error(errors.get(s))}</td>"
            for s in ("all", "demo_levels", "test_only_levels")
        )
        rows.append(f"<tr><th>{stage}</th>{cells}</tr>")
    counts = (
        f"requested {summary['requested']} = scored {summary['scored']} + failed "
        f"{summary['failed']} + cancelled {summary['cancelled']}"
        f" ({'balanced' if summary['balanced'] else 'NOT balanced'})"
    )
    images = "".join(f'<figure><img src="{p}" alt="{p}"></figure>' for p in PLOTS)
    raw = html.escape(json.dumps(summary, indent=2))
    return f"""<!doctype html>
<html><head><meta charset="utf-8"><title>roost train: {html.escape(name)}</title>
<style>body{{font-family:sans-serif;max-width:1100px;margin:auto}}
td,th{{padding:4px 10px;border-bottom:1px solid #ddd}}figure{{display:inline-block;margin:4px}}
</style></head><body>
<h1>roost train: {html.escape(name)}</h1>
<h2>Held-out pass rate (greedy / sampled ± its sampling error, points)</h2>
<table><tr><th></th><th>all</th><th>demo levels</th><th>test-only levels</th></tr>
{"".join(rows)}</table>
<p>{counts}; {summary["versions"]} versions; max staleness {summary["max_staleness_seen"]};
{summary["throughput"]["rollouts_per_s"]:.2f} rollouts/s;
RL {summary["rl_seconds"]:.0f} s; wall {summary["wall_seconds"]:.0f} s.</p>
{images}
<h2>summary.json</h2><pre>{raw}</pre>
</body></html>
"""


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{value:.0%}"


def _error(se: float | None) -> str:
    """The sampled figure's standard error, in points (none recorded: nothing)."""
    return "" if se is None else f" ± {100 * se:.1f}"
