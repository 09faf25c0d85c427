"""`roost train`: run an agent RL experiment end to end (see docs/training.md)."""

from __future__ import annotations

import json
import signal
import sys
from pathlib import Path
from typing import Any

import click


@click.command("train")
@click.argument(
    "config_path",
    metavar="[CONFIG]",
    required=False,
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
)
@click.option(
    "--set",
    "overrides",
    multiple=True,
    metavar="KEY.PATH=VALUE",
    help="Override one setting, e.g. --set learner.lr=3e-4 (repeatable).",
)
@click.option("--out", type=click.Path(path_type=Path), help="Run directory (default: runs/...).")
@click.option(
    "--resume",
    type=click.Path(exists=True, file_okay=False, path_type=Path),
    help="Continue the run in this directory from its last checkpoint.",
)
@click.option("--control", is_flag=True, help="Also train an SFT-only control for comparison.")
@click.option(
    "--profile",
    is_flag=True,
    help="At the end, profile the run (as `roost profile RUN_DIR`) into its report.",
)
@click.option(
    "--chaos",
    metavar="SPEC",
    help="Inject faults during RL, e.g. kill_sandbox=0.02,crash.learner=0.01 "
    "(docs/reliability.md lists every kind).",
)
@click.option("--log-format", type=click.Choice(["console", "json"]), default="console")
def train_command(
    config_path: Path | None,
    overrides: tuple[str, ...],
    out: Path | None,
    resume: Path | None,
    control: bool,
    profile: bool,
    chaos: str | None,
    log_format: str,
) -> None:
    """Train the default small model on code tasks: SFT warm start, then asynchronous RL in
    real sandboxes, with held-out evaluation, a live view and a report.

    With no CONFIG, runs the embedded default experiment.
    """
    from roost.train.config import ConfigError, check_resume, load_train_config
    from roost.train.rundir import default_run_dir
    from runtime import configure_logging

    configure_logging(format="json" if log_format == "json" else "console", level="info")
    if resume is not None:
        if config_path is not None or out is not None:
            raise click.UsageError("--resume takes its config and directory from RUN_DIR")
        if not (resume / "config.toml").exists():
            raise click.BadParameter(f"{resume} holds no config.toml", param_hint="--resume")
        config_path, run_dir = resume / "config.toml", resume
    try:
        config = load_train_config(
            config_path,
            [
                *overrides,
                *(["control=true"] if control else []),
                *([f"chaos={json.dumps(chaos)}"] if chaos is not None else []),  # a TOML string
            ],
        )
    except ConfigError as exc:
        raise click.BadParameter(str(exc), param_hint="CONFIG/--set") from None
    if resume is not None and overrides:
        try:  # before config.toml is rewritten and before anything trains
            check_resume(load_train_config(config_path), config)
        except ConfigError as exc:
            raise click.BadParameter(str(exc), param_hint="--set") from None
    if resume is None:
        run_dir = out or default_run_dir(config.name)
        if (run_dir / "config.toml").exists():
            raise click.BadParameter(
                f"{run_dir} already holds a run; continue it with --resume {run_dir}",
                param_hint="--out",
            )
    elif overrides or control or chaos is not None:
        # What runs from now on is what the directory records.
        from runtime.config import dump_config

        (run_dir / "config.toml").write_text(dump_config(config))
    click.echo(f"run directory: {run_dir}", err=True)
    from roost.train.run import TrainError

    try:
        summary = _run(config, run_dir)
    except TrainError as exc:
        raise click.ClickException(str(exc)) from None
    from roost.train.report import ReportError, build_report

    report: Path | None = None
    try:
        report = build_report(run_dir)
        shown = str(report)
    except ReportError as exc:
        # The run, its log and its summary are written: a report that fails (a damaged
        # metrics line, a full disk) must not hide them or the resume hint below.
        shown = f"not built: {exc}"
    click.echo(f"summary: {run_dir / 'summary.json'}\nreport: {shown}", err=True)
    if profile and report is not None:
        from roost.train.profile_export import profile_training_run

        profile_training_run(run_dir)
    if summary.get("interrupted"):
        click.echo(f"stopped; continue with: roost train --resume {run_dir}", err=True)
    if report is None:
        raise click.ClickException(f"the report was not built; `roost report {run_dir}` retries")


def _run(config: Any, run_dir: Path) -> dict[str, Any]:
    import anyio

    from roost.train.collector import RunCounts
    from roost.train.run import TrainError, TrainHooks, train
    from roost.train.view import Dashboard
    from runtime import run as run_loop

    live = config.view.live == "on" or (config.view.live == "auto" and sys.stderr.isatty())

    async def main() -> dict[str, Any]:
        hooks = TrainHooks(dashboard=Dashboard(config, RunCounts(), live=live))
        result: dict[str, Any] = {}
        failed: list[TrainError] = []
        async with anyio.create_task_group() as group:

            async def on_signals() -> None:
                with anyio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
                    async for _ in signals:
                        if hooks.stop.is_set():  # a second Ctrl-C: stop now
                            group.cancel_scope.cancel()
                            return
                        hooks.stop.set()

            group.start_soon(on_signals)
            try:
                result.update(await train(config, run_dir, hooks=hooks))
            except TrainError as exc:  # out of the task group unwrapped, for a clean message
                failed.append(exc)
            result["interrupted"] = hooks.stop.is_set()
            group.cancel_scope.cancel()
        if failed:
            raise failed[0]
        return result

    return run_loop(main)
