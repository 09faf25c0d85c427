"""The `roost` console script. Each command group lives in its own module under `commands/`."""

from __future__ import annotations

import click

from roost.commands.answers import answers_command
from roost.commands.bench import bench
from roost.commands.compare import compare_command
from roost.commands.learn import sft_command
from roost.commands.profile import profile_command
from roost.commands.report import report_command
from roost.commands.sandbox import sandbox
from roost.commands.stress import stress
from roost.commands.tasks import tasks
from roost.commands.train import train_command


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="roost")
def cli() -> None:
    """roost: an actor runtime for agent reinforcement learning on one host."""


cli.add_command(bench)
cli.add_command(stress)
cli.add_command(tasks)
cli.add_command(sandbox)
cli.add_command(sft_command)
cli.add_command(train_command)
cli.add_command(report_command)
cli.add_command(compare_command)
cli.add_command(answers_command)
cli.add_command(profile_command)


def main() -> None:
    cli()
