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
@click.option(
    "--parts",
    type=click.IntRange(min=1),
    default=4,
    show_default=True,
    help="Time slices of the RL phase (at most one per first attempt).",
)
@click.option(
    "--by-form",
    is_flag=True,
    help="Split the last slice by the forms of the tasks' operations (I, N, C).",
)
@click.option(
    "--json",
    "json_out",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Also write the rows here (JSON).",
)
def answers_command(
    run_dir: Path, level: int, parts: int, by_form: bool, json_out: Path | None
) -> None:
    """How the first attempts at LEVEL went in RUN_DIR's RL phase, slice by slice: how many
    wrote as many operations as their task, how many passed, and which operation the answers
    one short left out (procedural tasks; nothing is run). With --by-form, the last slice
    split by the forms of each task's operations."""
    from roost.train.answers import AnswersError, chain_answers, chain_answers_by_form

    try:
        if by_form:
            rows = chain_answers_by_form(run_dir, level, parts)
        else:
            rows = {
                f"{i}/{parts}": part
                for i, part in enumerate(chain_answers(run_dir, level, parts), 1)
            }
    except AnswersError as exc:
        raise click.ClickException(str(exc)) from None
    console = Console()
    if by_form:
        title = f"level {level}: first attempts in the last {_fraction(parts)} of RL, by form"
    else:
        title = f"level {level}: first attempts of scored rollouts, in time order"
    console.print(_table(rows, title, "form" if by_form else "part"))
    console.print(_LEGEND.format(level=level), highlight=False)
    if by_form:
        console.print(_FORMS, highlight=False)
    if json_out is not None:
        data = msgspec.to_builtins(rows if by_form else list(rows.values()))
        try:
            json_out.parent.mkdir(parents=True, exist_ok=True)
            json_out.write_text(json.dumps(data, indent=2) + "\n")
        except OSError as exc:
            raise click.ClickException(f"{json_out}: cannot write ({exc.strerror})") from None
        console.print(f"wrote {json_out}")


_LEGEND = (
    "ops: answers with the task's {level} operations; ops ok: the share of those that "
    "passed; unread: not a chain of the generator's operations; -1st, -mid, -last: one "
    "operation short, by the one left out (-any: no single one); other: any other length"
)


_FORMS = (
    "form: the task's operations, innermost first: I infix (+ - * ** % //), N negation, "
    "C a call (abs, max, min)"
)


def _fraction(parts: int) -> str:
    return "slice" if parts == 1 else "half" if parts == 2 else f"1/{parts}"


def _share(part: int, whole: int) -> str:
    return "-" if whole == 0 else f"{100 * part / whole:.0f} %"


def _table(rows: dict[str, AnswersPart], title: str, label: str) -> Table:
    table = Table(
        title=title,
        title_justify="left",
        box=box.SIMPLE_HEAD,  # no column rules, one space of padding: eleven columns fit in 80
        padding=(0, 1, 0, 0),
        pad_edge=False,
    )
    columns = [label, "n", "pass", "ops", "ops ok", "unread", "-1st", "-mid", "-last", "-any"]
    columns += ["other"]
    for column in columns:
        table.add_column(column, justify="right")
    for name, part in rows.items():
        short = part.short_by_one
        table.add_row(
            name,
            str(part.attempts),
            _share(part.passed, part.attempts),
            _share(part.full_length, part.attempts),
            _share(part.full_length_passed, part.full_length),
            str(part.not_a_chain),
            *(str(short[key]) for key in ("first", "middle", "last", "other")),
            str(part.other_length),
        )
    return table
