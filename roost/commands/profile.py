"""`roost profile RUN_DIR`: where the run's time went, printed and written into the run."""

from __future__ import annotations

from pathlib import Path

import click
from rich.console import Console

#: The most time bins `--bins` takes (the stacked plot is 700 pixels wide).
MAX_BINS = 1000


@click.command("profile")
@click.argument("run_dir", type=click.Path(file_okay=False, exists=True, path_type=Path))
@click.option(
    "--out",
    type=click.Path(file_okay=False, path_type=Path),
    help="Where to write profile.html, profile.json and the PNGs (default: RUN_DIR/profile).",
)
@click.option(
    "--bins",
    # More bins than the plot has pixels show nothing more; 10**8 of them exhausted memory.
    type=click.IntRange(min=1, max=MAX_BINS),
    default=20,
    show_default=True,
    help="Time bins of the breakdown over the run.",
)
def profile_command(run_dir: Path, out: Path | None, bins: int) -> None:
    """Rollout phase percentiles, actor busy time and mailboxes, the learner's critical path."""
    from roost.profile import ProfileInputError, analyze, load_run, print_profile, write_profile

    try:
        inputs = load_run(run_dir)
        result = analyze(inputs.rollouts, inputs.metrics, inputs.steps, bins=bins)
    except ProfileInputError as exc:
        raise click.ClickException(str(exc)) from None
    console = Console()
    print_profile(result, console)
    target = out or run_dir / "profile"
    try:
        written = write_profile(result, target)
    except OSError as exc:  # a read-only run, a file in the way of --out
        where = exc.filename or target
        raise click.ClickException(f"{where}: cannot write the profile ({exc.strerror})") from None
    for path in written:
        console.print(f"wrote {path}")
