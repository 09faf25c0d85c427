"""`roost report RUN_DIR`: rebuild a training run's summary plots and report page."""

from __future__ import annotations

from pathlib import Path

import click


@click.command("report")
@click.argument("run_dir", type=click.Path(exists=True, file_okay=False, path_type=Path))
def report_command(run_dir: Path) -> None:
    """Rebuild RUN_DIR/report.html and its PNG plots from the run's files."""
    from roost.train.report import ReportError, build_report

    try:
        path = build_report(run_dir)
    except ReportError as exc:
        raise click.ClickException(str(exc)) from None
    except OSError as exc:  # a read-only copy of a run, a full disk, a directory in the way
        where = exc.filename or run_dir
        raise click.ClickException(f"{where}: {exc.strerror} (rebuilding the report)") from None
    click.echo(str(path))
