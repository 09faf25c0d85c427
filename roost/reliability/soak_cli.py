"""`scripts/soak`: run the leak soak and print its checkpoints as a table (see `soak`)."""

from __future__ import annotations

import math
import sys
from collections.abc import Callable

import anyio
import click
from rich.console import Console
from rich.table import Table

from roost.reliability.probes import ResourceSample
from roost.reliability.soak import SoakConfig, SoakReport, SoakStalledError, run_soak, write_json

COLUMNS: tuple[tuple[str, Callable[[ResourceSample], str]], ...] = (
    ("t (s)", lambda s: f"{s.elapsed_s:.0f}"),
    ("episodes", lambda s: str(s.episodes)),
    ("open files", lambda s: str(s.open_files)),
    ("threads", lambda s: str(s.threads)),
    ("processes", lambda s: str(s.processes)),
    ("containers", lambda s: "-" if s.containers is None else str(s.containers)),
    ("cgroups", lambda s: str(s.cgroups)),
    ("mounts", lambda s: str(s.mounts)),
    ("RSS MiB", lambda s: f"{s.rss_mb:.1f}"),
    ("tree RSS MiB", lambda s: f"{s.tree_rss_mb:.1f}"),
    ("disk MiB", lambda s: f"{s.disk_mb:.2f}"),
)


def _table(report: SoakReport) -> Table:
    table = Table(title=f"leak soak: {report.config.backend}, {report.config.concurrency} at once")
    table.add_column("checkpoint")
    for name, _ in COLUMNS:
        table.add_column(name, justify="right")
    baseline = report.config.warmup_checkpoints + 1
    for index, sample in enumerate(report.samples):
        label = "start" if index == 0 else "warm-up" if index < baseline else str(index)
        if index == baseline:
            label = "baseline"
        table.add_row(label, *(cell(sample) for _, cell in COLUMNS))
    return table


@click.command()
@click.option("--minutes", type=float, default=None, help="How long to run (default 10).")
@click.option("--seconds", type=float, default=None, help="How long to run, for short runs.")
@click.option(
    "--interval", type=float, default=60.0, show_default=True, help="Seconds between checkpoints."
)
@click.option("--concurrency", type=int, default=16, show_default=True, help="Episodes at once.")
@click.option(
    "--backend",
    type=click.Choice(["process", "docker", "gvisor"]),
    default="process",
    show_default=True,
)
@click.option(
    "--json",
    "json_path",
    type=click.Path(dir_okay=False),
    default=None,
    help="Write the report here.",
)
def main(
    minutes: float | None,
    seconds: float | None,
    interval: float,
    concurrency: int,
    backend: str,
    json_path: str | None,
) -> None:
    """Run concurrent episodes for a while and report whether open files, processes,
    containers, memory or disk grew. Exits 1 on a leak (or lost or infra-failed episodes, or
    too few checkpoints to judge), 2 on a bad option, 3 on a hang."""
    # `is None`, not falsiness: `--seconds 0` is a mistake to report, not a request for the
    # default; `not > 0` also refuses NaN, with which the soak would never reach its end.
    for name, value in (("--minutes", minutes), ("--seconds", seconds), ("--interval", interval)):
        if value is not None and not (value > 0 and math.isfinite(value)):
            raise click.BadParameter(
                f"must be a positive, finite number, got {value}", param_hint=name
            )
    if concurrency < 1:
        raise click.BadParameter(f"must be >= 1, got {concurrency}", param_hint="--concurrency")
    if minutes is None and seconds is None:
        duration = 600.0
    else:
        duration = (minutes or 0.0) * 60 + (seconds or 0.0)
    config = SoakConfig(
        duration_s=duration,
        interval_s=interval,
        concurrency=concurrency,
        backend=backend,  # type: ignore[arg-type]
    )
    console = Console()
    if not console.is_terminal:
        console = Console(width=160)  # a log file: room for every column

    def progress(sample: ResourceSample) -> None:
        console.print(
            f"[dim]t={sample.elapsed_s:.0f}s episodes={sample.episodes} files={sample.open_files} "
            f"processes={sample.processes} rss={sample.rss_mb:.1f} MiB[/dim]"
        )

    try:
        report = anyio.run(lambda: run_soak(config, on_sample=progress))
    except SoakStalledError as exc:
        console.print(f"[red]hang: {exc}[/red]")
        sys.exit(3)
    console.print(_table(report))
    outcomes = ", ".join(f"{k} {v}" for k, v in sorted(report.outcomes.items()))
    console.print(f"episodes: {report.finished} of {report.submitted} finished ({outcomes})")
    growth = ", ".join(f"{k} {v:+g}" for k, v in report.growth().items())
    console.print(f"growth after warm-up (last two checkpoints vs baseline): {growth or 'n/a'}")
    if json_path:
        write_json(report, json_path)
    problems = report.problems()
    for problem in problems:
        console.print(f"[red]problem: {problem}[/red]")
    if not problems:
        console.print("[green]no growth after warm-up, every episode accounted for[/green]")
    sys.exit(1 if problems else 0)


if __name__ == "__main__":
    main(prog_name="scripts/soak")
