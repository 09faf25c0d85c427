"""`roost profile RUN_DIR`: where the run's time went, printed and written into the run."""

from __future__ import annotations

from pathlib import Path

import click
from rich.console import Console


@click.command("profile")
@click.argument("run_dir", type=click.Path(file_okay=False, exists=True, path_type=Path))
@click.option(
    "--out",
    type=click.Path(file_okay=False, path_type=Path),
    help="Where to write profile.html, profile.json and the PNGs (default: RUN_DIR/profile).",
)
@click.option("--bins", type=click.IntRange(min=1), default=20, show_default=True)
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
    for path in write_profile(result, out or run_dir / "profile"):
        console.print(f"wrote {path}")
