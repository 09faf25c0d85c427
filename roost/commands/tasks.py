"""`roost tasks ...`: check a task file, or write a file of procedural tasks."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import anyio
import click

BACKEND_CHOICES = ("process", "docker", "gvisor")


@click.group()
def tasks() -> None:
    """Task files: validate them (`check`) and generate procedural ones (`generate`)."""


@tasks.command("check")
@click.argument("file", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--backend", type=click.Choice(BACKEND_CHOICES), default="process", show_default=True)
@click.option(
    "--json",
    "json_out",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Write the full report (per-task records included) to this file.",
)
@click.option(
    "--workers",
    type=click.IntRange(min=1),
    default=None,
    help="Parallel workers, one warm sandbox each [default: 2 x CPUs].",
)
@click.option(
    "--repeats",
    type=click.IntRange(min=1),
    default=2,
    show_default=True,
    help="Runs of each canonical solution; a verdict that changes is flaky.",
)
@click.option("--strict", is_flag=True, help="Also fail (exit 1) on weakly verified tasks.")
def tasks_check(
    file: Path, backend: str, json_out: Path | None, workers: int | None, repeats: int, strict: bool
) -> None:
    """Validate FILE: schema, canonical solutions pass, mutants fail, verdicts are stable.

    Exits 1 when a task is invalid, flaky or its canonical solution fails (and, with --strict,
    when a mutant survives).
    """
    from tasks._load import TaskFormatError, read_tasks

    if json_out is not None and not json_out.parent.is_dir():  # known now, not after the check
        raise click.BadParameter(f"{json_out.parent}: no such directory", param_hint="--json")
    try:
        loaded = read_tasks(file)
    except TaskFormatError as exc:
        raise click.ClickException(str(exc)) from None
    invalid = [(task_id, str(err)) for task_id, err in loaded.invalid]
    for _, reason in invalid:
        click.echo(f"invalid: {reason}", err=True)
    count = workers or 2 * (os.cpu_count() or 1)
    report = anyio.run(_check, loaded.tasks, backend, count, repeats, invalid)
    _print_summary(report)
    if json_out is not None:
        try:
            json_out.write_text(json.dumps(report, indent=2) + "\n")
        except OSError as exc:
            raise click.ClickException(f"--json: cannot write {json_out}: {exc.strerror}") from None
    bad = report["invalid"] or report["flaky"] or report["canonical_passed"] < report["checked"]
    if bad or (strict and report["weak"]):
        sys.exit(1)


async def _check(
    loaded: list[Any], backend: str, workers: int, repeats: int, invalid: list[tuple[str, str]]
) -> dict[str, Any]:
    from sandboxes._errors import SandboxInfraError
    from sandboxes._spec import SandboxSpec
    from sandboxes.factory import create_sandbox
    from sandboxes.pool import SandboxPool
    from tasks.check import check_tasks

    def factory(key: str) -> Any:
        return create_sandbox(SandboxSpec(backend=backend, runtime=key))  # type: ignore[arg-type]

    unusable = ""
    async with SandboxPool(factory, capacity=workers) as pool:
        # One sandbox first: a missing backend is one clear error, not every task invalid.
        lease = pool.lease_nowait("python")
        try:
            await lease.ready()
        except SandboxInfraError as exc:
            unusable = str(exc)
        else:
            lease.release()
            report = await check_tasks(
                loaded, pool, workers=workers, repeats=repeats, invalid=invalid
            )
    if unusable:  # raised out here: inside the pool it would arrive wrapped in a group
        raise click.ClickException(f"the {backend} backend is not usable: {unusable}")
    return report.to_json()


def _print_summary(report: dict[str, Any]) -> None:
    rate = report["mutant_kill_rate"]
    click.echo(
        f"tasks {report['tasks']}  checked {report['checked']}  "
        f"canonical passed {report['canonical_passed']}  "
        f"mutants failed {report['mutants_failed']}/{report['mutants']}"
        + (f" ({rate:.1%})" if rate is not None else "")
    )
    click.echo(
        f"weak {len(report['weak'])}  flaky {len(report['flaky'])}  "
        f"invalid {len(report['invalid'])}  time {report['seconds']:.1f}s"
        + (
            f" ({report['seconds_per_100_tasks']:.1f}s per 100 tasks)"
            if report["seconds_per_100_tasks"] is not None
            else ""
        )
    )
    for entry in report["invalid"]:
        click.echo(f"  invalid {entry['id']}: {entry['reason']}")
    for task_id in report["weak"]:
        record = next(r for r in report["records"] if r["id"] == task_id)
        click.echo(f"  weak {task_id}: survived by {', '.join(record['surviving'])}")
    for task_id in report["flaky"]:
        click.echo(f"  flaky {task_id}")


@tasks.command("generate")
@click.argument("out", type=click.Path(dir_okay=False, path_type=Path))
@click.option(
    "--count",
    type=click.IntRange(min=1),
    default=200,
    show_default=True,
    help="Tasks in all, spread evenly over the levels.",
)
@click.option("--levels", default="1-9", show_default=True, help="A range such as 1-4.")
@click.option("--seed", type=int, default=0, show_default=True)
@click.option(
    "--split", type=click.Choice(["train", "heldout"]), default="train", show_default=True
)
def tasks_generate(out: Path, count: int, levels: str, seed: int, split: str) -> None:
    """Write COUNT procedural tasks of the given levels to OUT (JSONL)."""
    from tasks._load import dump_jsonl
    from tasks.procedural import MAX_LEVEL, ProceduralTasks

    try:
        low, _, high = levels.partition("-")
        first, last = int(low), int(high or low)
    except ValueError:
        raise click.BadParameter(f"expected a range such as 1-4, got {levels!r}") from None
    if not 1 <= first <= last <= MAX_LEVEL:
        raise click.BadParameter(f"levels must lie in 1-{MAX_LEVEL}, got {levels!r}")
    source = ProceduralTasks(seed=seed)
    span = last - first + 1
    chosen = []
    for i, level in enumerate(range(first, last + 1)):
        share = count // span + (1 if i < count % span else 0)
        chosen += source.take(level, share, split=split)  # type: ignore[arg-type]
    written = dump_jsonl(chosen, out)
    click.echo(f"wrote {written} {split} tasks (levels {first}-{last}, seed {seed}) to {out}")
