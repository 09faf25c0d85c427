"""What the model wrote at a chain level over a run's RL phase, read as chains of operations.

Held-out pass rates say how often a level passes; this says what the failures were. Each
scored rollout's first attempt at a procedural chain level is read with Python's parser as a
chain of the generator's operations (`tasks._chain_ast.parse_chain`; nothing runs) and set
beside its task's chain: did it write as many operations as the task has, did it pass, and,
when it wrote one operation too few, which one it left out. Level 3 of the default run is
where RL's gain is decided, and its failures are mostly answers one operation short
(docs/training-log.md, "Hindsight tasks"). The rollouts are split in time order into `parts`
slices of equal size, so a trend over the phase shows. `chain_answers_by_form` splits the last
slice by the forms of the task's operations (`tasks.procedural.chain_form`): which
openings an expression-style answer needs, where the failures concentrate (docs/training-log.md,
"Session 29").
"""

from __future__ import annotations

from pathlib import Path

import msgspec

from roost.train.config import ConfigError, load_train_config
from roost.train.records import TrajectoryRecord
from roost.train.rundir import RunDir
from roost.train.summary import load_run_records
from roost.train.task_source import procedural_tasks
from tasks._chain_ast import parse_chain
from tasks.procedural import CHAIN_LEVELS, ProceduralTasks, chain_form

__all__ = [
    "AnswersError",
    "AnswersPart",
    "chain_answers",
    "chain_answers_by_form",
    "left_out",
]


class AnswersError(Exception):
    """Not a run directory of procedural tasks, a level that is not a chain or has no scored
    rollout, or more parts than first attempts."""


class AnswersPart(msgspec.Struct, frozen=True):
    """One time slice of a level's first attempts."""

    attempts: int
    passed: int
    #: Answers with as many operations as their task, and how many of those passed.
    full_length: int
    full_length_passed: int
    #: Answers that are not a chain of the generator's operations (another program, or none).
    not_a_chain: int
    #: Answers one operation short, by the position of the one left out of the task's chain:
    #: "first", "middle", "last", or "other" (no single omission gives the answer, or more
    #: than one position does: a repeated operation).
    short_by_one: dict[str, int]
    #: Any other length: two or more operations short, or longer than the task.
    other_length: int


def left_out(want: list[str], got: list[str]) -> str:
    """Which operation of `want` (kinds, innermost first) `got`, one shorter, left out."""
    if len(got) != len(want) - 1:
        return "other"
    positions = {i for i in range(len(want)) if want[:i] + want[i + 1 :] == got}
    names = {"first" if i == 0 else "last" if i == len(want) - 1 else "middle" for i in positions}
    return names.pop() if len(names) == 1 else "other"


_FirstAttempt = tuple[float, list[str], list[str] | None, bool]


def chain_answers(run_dir: Path, level: int, parts: int = 4) -> list[AnswersPart]:
    """The first attempts at `level` of the run's scored rollouts, in `parts` time slices.

    :raises AnswersError: naming what is wrong (no run, not procedural tasks, no such level,
        no scored rollout at it, more parts than first attempts).
    """
    return [_part(part) for part in _slices(run_dir, level, parts)]


def chain_answers_by_form(run_dir: Path, level: int, parts: int = 4) -> dict[str, AnswersPart]:
    """The last of `parts` time slices (where the phase ended), by the forms of each task's
    operations, innermost first ("IIC": two infix operations, then a call), most drawn first.

    :raises AnswersError: as `chain_answers`.
    """
    by_form: dict[str, list[_FirstAttempt]] = {}
    for first in _slices(run_dir, level, parts)[-1]:
        by_form.setdefault(chain_form(first[1]), []).append(first)
    ranked = sorted(by_form.items(), key=lambda item: (-len(item[1]), item[0]))
    return {form: _part(firsts) for form, firsts in ranked}


def _slices(run_dir: Path, level: int, parts: int) -> list[list[_FirstAttempt]]:
    if parts < 1:
        raise AnswersError(f"parts: must be >= 1, got {parts}")
    run = RunDir(run_dir)
    if not run.config.exists():
        raise AnswersError(f"{run_dir}: no config.toml; not a roost train run directory")
    try:
        config = load_train_config(run.config).tasks
    except ConfigError as exc:  # its message names the file already
        raise AnswersError(str(exc)) from None
    if config.source != "procedural":
        raise AnswersError(f"{run_dir}: tasks.source is {config.source!r}; chains are procedural")
    if not 1 <= level <= CHAIN_LEVELS or level not in config.levels:
        raise AnswersError(
            f"level: {level} is not a chain level of this run (its levels: {config.levels}; "
            f"chains are levels 1 to {CHAIN_LEVELS})"
        )
    generator = procedural_tasks(config)
    try:
        records, _ = load_run_records(run)
    except OSError as exc:
        raise AnswersError(f"{run.log}: cannot read ({exc.strerror})") from None
    firsts: list[_FirstAttempt] = []
    for record in records:
        if not (isinstance(record, TrajectoryRecord) and record.status == "scored"):
            continue
        index = ProceduralTasks.stream_index(record.task_id)
        if record.level != level or not record.turns or index is None:
            continue
        solution = generator.task(level, index).canonical_solution or ""
        want = [kind for kind, _ in parse_chain(solution) or []]
        got = parse_chain(record.turns[0].text)
        kinds = None if got is None else [kind for kind, _ in got]
        firsts.append((record.finished_at, want, kinds, record.turns[0].passed))
    firsts.sort(key=lambda first: first[0])
    n = len(firsts)
    if n == 0:  # slices of nothing would read as a level never failed
        raise AnswersError(
            f"{run.log}: no scored rollout at level {level} (a run stopped before its RL phase?)"
        )
    if parts > n:  # empty slices say nothing, and 10**8 of them exhausted memory
        raise AnswersError(
            f"parts: {parts} slices of {n} first attempts at level {level}; at most {n}"
        )
    return [firsts[i * n // parts : (i + 1) * n // parts] for i in range(parts)]


def _part(firsts: list[_FirstAttempt]) -> AnswersPart:
    short = dict.fromkeys(("first", "middle", "last", "other"), 0)
    full = full_passed = unreadable = other_length = 0
    for _, want, got, passed in firsts:
        if got is None:
            unreadable += 1
        elif len(got) == len(want):
            full += 1
            full_passed += passed
        elif len(got) == len(want) - 1:
            short[left_out(want, got)] += 1
        else:
            other_length += 1
    return AnswersPart(
        attempts=len(firsts),
        passed=sum(passed for *_, passed in firsts),
        full_length=full,
        full_length_passed=full_passed,
        not_a_chain=unreadable,
        short_by_one=short,
        other_length=other_length,
    )
