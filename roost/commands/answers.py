"""`roost answers RUN_DIR`: a chain level's first attempts over the RL phase, read as chains."""

from __future__ import annotations

import json
from pathlib import Path

import click
import msgspec
from rich import box
from rich.console import Console
from rich.table import Table

from roost.train.answers import AnswersPart


@click.command("answers")
@click.argument("run_dir", type=click.Path(path_type=Path))
@click.option("--level", default=3, show_default=True, help="A chain level of the run (1-4).")
@click.option("--parts", default=4, show_default=True, help="Time slices of the RL phase.")
@click.option(
    "--json",
    "json_out",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Also write the slices here.",
)
def answers_command(run_dir: Path, level: int, parts: int, json_out: Path | None) -> None:
    """How the first attempts at LEVEL went in RUN_DIR's RL phase, slice by slice: how many
    wrote as many operations as their task, how many passed, and which operation the answers
    one short left out (procedural tasks; nothing is run)."""
    from roost.train.answers import AnswersError, chain_answers

    try:
        slices = chain_answers(run_dir, level, parts)
    except AnswersError as exc:
        raise click.ClickException(str(exc)) from None
    console = Console()
    console.print(_table(slices, level))
    console.print(_LEGEND.format(level=level), highlight=False)
    if json_out is not None:
        json_out.parent.mkdir(parents=True, exist_ok=True)
        json_out.write_text(json.dumps(msgspec.to_builtins(slices), indent=2) + "\n")
        console.print(f"wrote {json_out}")


_LEGEND = (
    "ops: answers with the task's {level} operations; ops ok: the share of those that "
    "passed; unread: not a chain of the generator's operations; -1st, -mid, -last: one "
    "operation short, by the one left out (-any: no single one); other: any other length"
)


def _share(part: int, whole: int) -> str:
    return "-" if whole == 0 else f"{100 * part / whole:.0f} %"


def _table(slices: list[AnswersPart], level: int) -> Table:
    table = Table(
        title=f"level {level}: first attempts of scored rollouts, in time order",
        title_justify="left",
        box=box.SIMPLE_HEAD,  # no column rules, one space of padding: eleven columns fit in 80
        padding=(0, 1, 0, 0),
        pad_edge=False,
    )
    columns = ["part", "n", "pass", "ops", "ops ok", "unread", "-1st", "-mid", "-last", "-any"]
    columns += ["other"]
    for column in columns:
        table.add_column(column, justify="right")
    for i, part in enumerate(slices, 1):
        short = part.short_by_one
        table.add_row(
            f"{i}/{len(slices)}",
            str(part.attempts),
            _share(part.passed, part.attempts),
            _share(part.full_length, part.attempts),
            _share(part.full_length_passed, part.full_length),
            str(part.not_a_chain),
            *(str(short[key]) for key in ("first", "middle", "last", "other")),
            str(part.other_length),
        )
    return table
