"""`roost compare RUN_DIR...`: runs' held-out figures side by side, and the spread of RL's gain."""

from __future__ import annotations

import json
from pathlib import Path

import click
import msgspec
from rich.console import Console
from rich.table import Table

from roost.train.compare import GainStats, HeldOut, PoolStats, RunFigures

MODES = ("greedy", "sampled")


@click.command("compare")
@click.argument("run_dirs", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option(
    "--json",
    "json_out",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Also write the rows and the pooled statistics here.",
)
def compare_command(run_dirs: tuple[Path, ...], json_out: Path | None) -> None:
    """Show the held-out figures of RUN_DIRS side by side; runs from the same warm start are
    pooled into the mean gain of RL with a 95 % interval, and runs of several warm starts
    also all together (each gain against its own warm start)."""
    from roost.train.compare import (
        CompareError,
        load_run_figures,
        pool_all,
        pool_by_warm_start,
        pool_stats,
    )

    seen: dict[Path, Path] = {}
    for run_dir in run_dirs:
        # The same run twice would be pooled as two draws: a spread of zero and an interval
        # narrower than the runs support.
        first = seen.setdefault(run_dir.resolve(), run_dir)
        if first is not run_dir:
            raise click.BadParameter(
                f"{run_dir} is the same run as {first}; give each run once", param_hint="RUN_DIRS"
            )
    try:
        runs = [load_run_figures(run_dir) for run_dir in run_dirs]
    except CompareError as exc:
        raise click.ClickException(str(exc)) from None
    console = Console()
    console.print(_runs_table(runs))
    groups = pool_by_warm_start(runs)
    pools = [pool_stats(group) for group in groups]
    overall = pool_all(groups)
    for pool in pools:
        console.print(_pool_lines(pool))
    if overall is not None:
        console.print(_pool_lines(overall))
    if json_out is not None:
        rows = [
            {
                **msgspec.to_builtins(run),
                "gain_se": run.gain_se,
                **{f"gain_{mode}": run.gain(mode) for mode in MODES},
                **{f"over_control_{mode}": run.over_control(mode) for mode in MODES},
            }
            for run in runs
        ]
        document = {
            "runs": rows,
            "pools": msgspec.to_builtins(pools),
            "all_runs": msgspec.to_builtins(overall),  # null: one warm start (or none)
        }
        try:
            json_out.parent.mkdir(parents=True, exist_ok=True)
            json_out.write_text(json.dumps(document, indent=2) + "\n")
        except OSError as exc:
            raise click.ClickException(f"{json_out}: cannot write ({exc.strerror})") from None
        console.print(f"wrote {json_out}")


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.1f}"


def _points(value: float | None) -> str:
    return "-" if value is None else f"{value:+.1f}"


def _runs_table(runs: list[RunFigures]) -> Table:
    with_control = any(run.control is not None for run in runs)
    table = Table(
        title="held-out pass rate, greedy / sampled (%); ± the sampled gain's evaluation error",
        title_justify="left",
    )
    for column in ("run", "versions", "rollouts/s", "wall", "after SFT", "after RL", "gain"):
        table.add_column(column, justify="left" if column == "run" else "right")
    if with_control:
        table.add_column("RL - control, test-only", justify="right")
    table.add_column("sampled by level, SFT → RL")
    for run in runs:
        cells = [
            run.run,
            str(run.versions),
            f"{run.rollouts_per_s:.1f}",
            f"{run.wall_seconds / 60:.1f} min",
            _pair(run.after_sft),
            _pair(run.after_rl),
            f"{_points(run.gain('greedy'))} / {_points(run.gain('sampled'))}"
            + ("" if run.gain_se is None else f" ± {run.gain_se:.1f}"),
        ]
        if with_control:
            cells.append(
                f"{_points(run.over_control('greedy'))} / {_points(run.over_control('sampled'))}"
            )
        cells.append(
            ", ".join(
                f"L{level} {_pct(sft)} → {_pct(rl)}"
                for level, (sft, rl) in run.sampled_by_level.items()
            )
        )
        table.add_row(*cells)
    return table


def _pair(figures: HeldOut | None) -> str:
    if figures is None:
        return "-"
    return f"{_pct(figures.all.greedy)} / {_pct(figures.all.sampled)}"


def _pool_lines(pool: PoolStats) -> str:
    if pool.after_sft is None:
        heading = f"all {len(pool.runs)} runs, each gain against its own warm start:"
    else:
        start = _pair(pool.after_sft)
        heading = f"{len(pool.runs)} run(s) from one warm start (after SFT {start} %):"
    lines = [heading]
    for label, stats in (
        ("RL's gain, greedy", pool.gain_greedy),
        ("RL's gain, sampled", pool.gain_sampled),
        ("RL - control, test-only, greedy", pool.over_control_greedy),
        ("RL - control, test-only, sampled", pool.over_control_sampled),
    ):
        if stats is not None:
            lines.append(f"  {label}: {_describe(stats)}")
    if pool.baseline_se is not None:
        lines.append(
            f"  the warm start's own evaluation error, sampled: ±{pool.baseline_se:.1f} points, "
            "shared by these runs (it moves their mean gain; more runs do not shrink it)"
        )
    return "\n".join(lines)


def _describe(stats: GainStats) -> str:
    text = f"mean {stats.mean:+.1f} points"
    noise = "" if stats.eval_sd is None else f"; after-RL evaluation alone: sd {stats.eval_sd:.1f}"
    if stats.sd is None or stats.low is None or stats.high is None:
        return f"{text} (one run: no spread{noise})"
    return (
        f"{text}, sd {stats.sd:.1f}, 95 % interval of the mean "
        f"[{stats.low:+.1f}, {stats.high:+.1f}] (n = {stats.n}{noise})"
    )
