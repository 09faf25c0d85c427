"""The comparison table, the JSON document and the plots of a `roost stress` run."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from roost.figures import save_figure

__all__ = ["print_table", "to_json", "write_plots"]

_COLUMNS = [
    ("policy", "policy", "{}"),
    ("makespan (sim s)", "makespan_s", "{:,.1f}"),
    ("rollouts/s (sim)", "throughput_per_s", "{:,.2f}"),
    ("latency p50", "latency_p50_s", "{:,.1f}"),
    ("latency p99", "latency_p99_s", "{:,.1f}"),
    ("queue wait p99", "queue_wait_p99_s", "{:,.1f}"),
    ("utilization", "utilization", "{:.0%}"),
    ("cold starts", "cold_starts", "{:,}"),
    ("retries", "retries", "{:,}"),
    ("completed", "completed", "{:,}"),
    ("failed", "failed", "{:,}"),
    ("cancelled", "cancelled", "{:,}"),
    ("fairness (Jain)", "fairness_jain", "{:.3f}"),
]


def print_table(title: str, results: list[dict[str, Any]], console: Console) -> None:
    """One column per policy, one row per measure (fits a terminal with many policies)."""
    table = Table(title=title)
    table.add_column("measure")
    for result in results:
        table.add_column(result["policy"], justify="right")
    for header, key, fmt in _COLUMNS[1:]:
        table.add_row(header, *(fmt.format(result[key]) for result in results))
    reasons = sorted({reason for r in results for reason in r["failures_by_reason"]})
    for reason in reasons:
        table.add_row(
            f"failed: {reason}",
            *(f"{r['failures_by_reason'].get(reason, 0):,}" for r in results),
        )
    table.add_row("wall s", *(f"{r['wall']['seconds']:.2f}" for r in results))
    console.print(table)


def to_json(header: dict[str, Any], results: list[dict[str, Any]]) -> str:
    """One object: the run's parameters, then one object per policy (without the raw series).

    Keys are sorted so that the same seed gives byte-identical text apart from `wall`.
    """
    policies = [{k: v for k, v in r.items() if k != "series"} for r in results]
    return json.dumps({**header, "policies": policies}, indent=2, sort_keys=True) + "\n"


def write_plots(results: list[dict[str, Any]], directory: Path) -> list[Path]:
    """latency_cdf.png (one line per policy) and utilization.png (over simulated time)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    directory.mkdir(parents=True, exist_ok=True)
    written = []
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for result in results:
        latencies = result["series"]["latency_s"]
        n = len(latencies)
        ax.plot(latencies, [(i + 1) / n for i in range(n)], label=result["policy"])
    ax.set_xlabel("rollout latency (simulated s)")
    ax.set_ylabel("fraction of rollouts")
    ax.set_title("Rollout latency CDF")
    ax.grid(alpha=0.3)
    ax.legend()
    written.append(save_figure(fig, directory / "latency_cdf.png", dpi=120))

    fig, ax = plt.subplots(figsize=(7, 4.5))
    for result in results:
        series = result["series"]["utilization"]
        ax.plot([t for t, _ in series], [u for _, u in series], label=result["policy"])
    ax.set_xlabel("simulated time (s)")
    ax.set_ylabel("busy sandboxes / capacity")
    ax.set_ylim(0, 1.05)
    ax.set_title("Sandbox utilization")
    ax.grid(alpha=0.3)
    ax.legend()
    written.append(save_figure(fig, directory / "utilization.png", dpi=120))
    return written
