"""`roost bench scale` and `roost bench all` (registered on the `bench` group in bench.py)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import click
from rich.console import Console

from roost.bench._report import print_table


@click.command("scale")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object instead of a table.")
@click.option("--quick", is_flag=True, help="500 sim and 10 process rollouts (seconds).")
@click.option("--repeats", type=click.IntRange(min=1), help="Runs of each part (median lag).")
def bench_scale(as_json: bool, quick: bool, repeats: int | None) -> None:
    """10,000 concurrent sim rollouts and 1,000 warm process sandboxes, on the real clock."""
    from roost.bench import scale as suite
    from runtime.logs import configure_logging

    configure_logging(level="error")
    result = suite.run(quick=quick, repeats=repeats)
    if as_json:
        json.dump(result, sys.stdout, indent=2)
        sys.stdout.write("\n")
        return
    console = Console()
    for part in ("sim", "process"):
        figures = result[part]
        if "missing" in figures:
            console.print(f"[yellow]{part}: not measured: {figures['missing']}[/yellow]")
            continue
        print_table(
            f"roost bench scale: {part}, {figures['rollouts']:,} in flight", _rows(figures), console
        )
    _print_verdicts(result["targets"], console)


def _rows(figures: dict[str, Any]) -> list[tuple[str, str, str]]:
    untuned = figures.get("gc_untuned")

    def tuned(key: str, unit: str) -> str:
        return "" if untuned is None else f"gc untuned: {untuned[key]:,.1f} {unit}"

    return [
        (
            "loop lag p99",
            f"{figures['loop_lag_p99_ms']:.1f} ms",
            tuned("loop_lag_p99_ms", "ms"),
        ),
        (
            "loop lag p99, own work only",
            f"{figures['loop_lag_own_p99_ms']:.1f} ms",
            tuned("loop_lag_own_p99_ms", "ms"),
        ),
        (
            "loop lag max",
            f"{figures['loop_lag_max_ms']:.1f} ms",
            tuned("loop_lag_max_ms", "ms"),
        ),
        (
            "memory per in-flight rollout",
            f"{figures['kib_per_inflight_rollout']:.1f} KiB",
            f"of which the backend's own {figures['backend_kib_per_inflight_rollout']:.1f} KiB",
        ),
        (
            "dispatches",
            f"{figures['dispatches_per_s']:,.0f} /s",
            tuned("dispatches_per_s", "/s"),
        ),
        ("peak in flight", f"{figures['peak_in_flight']:,}", ""),
        (
            "sandbox exec p99",
            f"{figures['sandbox_exec_p99_ms']:,.0f} ms",
            f"p50 {figures['sandbox_exec_p50_ms']:,.0f} ms",
        ),
        ("failures", str(figures["failures"]), f"{figures['completed']:,} completed"),
        ("load average (1 min)", f"{figures['load_average_1m']:.1f}", "others on the machine"),
    ]


def _print_verdicts(lines: list[dict[str, Any]], console: Console) -> None:
    for line in lines:
        value = "absent" if line["value"] is None else f"{line['value']:.4g}"
        verdict = {
            True: "[green]met[/green]",
            False: "[red]missed[/red]",
            None: "[yellow]not measured[/yellow]",
        }[line["met"]]
        console.print(f"{line.get('suite', '')} {line['target']}: {value} {verdict}".strip())


@click.command("all")
@click.option(
    "--json",
    "json_out",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Write the whole result here (one JSON file).",
)
@click.option("--quick", is_flag=True, help="Every suite's quick mode (the regression guard's).")
@click.option("--repeats", type=click.IntRange(min=1), help="Passed to every suite.")
def bench_all(json_out: Path | None, quick: bool, repeats: int | None) -> None:
    """Every suite (runtime, sandbox, generation, async, scale) in one run."""
    from roost.bench import all as suites
    from runtime.logs import configure_logging

    configure_logging(level="error")
    console = Console(stderr=True)

    def progress(name: str, entry: dict[str, Any]) -> None:
        if "missing" in entry:
            console.print(f"[yellow]{name}: missing: {entry['missing']}[/yellow]")
        elif "error" in entry:
            console.print(f"[red]{name}: failed: {entry['error']}[/red]")
        else:
            console.print(f"{name}: done in {entry['seconds']:.0f} s")

    document = suites.run(quick=quick, repeats=repeats, on_suite=progress)
    if json_out is not None:
        json_out.parent.mkdir(parents=True, exist_ok=True)
        json_out.write_text(json.dumps(document, indent=2) + "\n")
        console.print(f"wrote {json_out}")
    _print_verdicts(document["targets"], console)
    if document["errors"]:
        raise click.ClickException(f"suites failed: {', '.join(document['errors'])}")
