"""`roost answers`: a chain level's first attempts read as chains, in time slices."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from roost.cli import cli
from roost.train.answers import AnswersError, chain_answers, chain_answers_by_form, left_out
from roost.train.config import TrainConfig, load_train_config
from roost.train.records import TrajectoryRecord, TurnRecord
from roost.train.rundir import RunDir
from runtime import encode
from runtime.config import dump_config
from runtime.journal import JournalWriter
from tasks import ProceduralTasks
from tasks._chain_ast import parse_chain
from tasks.procedural import chain_form, operation_form


def _steps(task_index: int) -> list[str]:
    """The task's chain as steps, one line per operation, then the return line."""
    steps = ProceduralTasks(seed=0, max_level=3, solution_style="steps")
    solution = steps.task(3, task_index).canonical_solution
    assert solution is not None
    return solution.splitlines(keepends=True)


def _record(n: int, task_id: str, text: str, *, level: int = 3, passed: bool = False) -> bytes:
    return encode(
        TrajectoryRecord(
            rollout_id=f"r{n}",
            task_id=task_id,
            level=level,
            demo_level=level < 3,
            status="scored",
            turns=[TurnRecord(text=text, passed=passed, score=float(passed))],
            finished_at=float(n),
        )
    )


def _failed(task_id: str) -> TrajectoryRecord:
    return TrajectoryRecord(
        rollout_id="r11", task_id=task_id, level=3, demo_level=False, status="failed"
    )


def _run(tmp_path: Path, config: TrainConfig | None = None) -> Path:
    run = RunDir(tmp_path / "run")
    run.root.mkdir(parents=True)
    run.config.write_text(dump_config(config or load_train_config(None)))
    return run.root


def test_first_attempts_are_counted_by_length_and_by_the_operation_left_out(
    tmp_path: Path,
) -> None:
    root = _run(tmp_path)
    tasks = ProceduralTasks(seed=0, max_level=3)
    # Three-operation tasks whose operations differ, so each omission has one reading.
    indices = [i for i in range(200) if len({op for op, _ in _chain(tasks, i)}) == 3][:4]
    ids = [tasks.task(3, i).id for i in indices]
    lines = [_steps(i) for i in indices]
    with JournalWriter(RunDir(root).log) as log:
        # First half in time: a full answer that passed, one without its middle operation,
        # one without its first, and text that is not a chain.
        log.append(_record(1, ids[0], "".join(lines[0]), passed=True))
        log.append(_record(2, ids[1], "".join(lines[1][:1] + lines[1][2:])))
        log.append(_record(3, ids[2], "".join(lines[2][1:])))
        log.append(_record(4, ids[3], "    return x +\n"))
        # Second half: a full answer that failed, one short by two, and one without its last.
        log.append(_record(5, ids[0], "".join(lines[0])))
        log.append(_record(6, ids[1], "".join(lines[1][2:])))
        log.append(_record(7, ids[2], "".join(lines[2][:2] + lines[2][3:])))
        log.append(_record(8, ids[3], "    return abs(x)\n"))  # a chain of another length
        # Not counted: another level, a hindsight task's id, a failed rollout.
        log.append(_record(9, tasks.task(2, 0).id, "    return x\n", level=2))
        log.append(_record(10, "gen-L3-00ff-solved", "    return x\n"))
        log.append(encode(_failed(ids[0])))
    first, second = chain_answers(root, 3, parts=2)
    assert (first.attempts, first.passed, first.full_length, first.full_length_passed) == (
        4,
        1,
        1,
        1,
    )
    assert first.not_a_chain == 1
    assert first.short_by_one == {"first": 1, "middle": 1, "last": 0, "other": 0}
    assert (second.attempts, second.passed, second.full_length, second.full_length_passed) == (
        4,
        0,
        1,
        0,
    )
    assert second.short_by_one == {"first": 0, "middle": 0, "last": 1, "other": 0}
    assert second.other_length == 2  # two operations short, and the single `abs`
    (whole,) = chain_answers(root, 3, parts=1)
    assert whole.attempts == 8


def _chain(tasks: ProceduralTasks, index: int) -> list[tuple[str, int]]:
    return parse_chain(tasks.task(3, index).canonical_solution or "") or []


def test_the_omitted_operation_is_named_only_when_one_reading_fits() -> None:
    assert left_out(["mul", "sub", "square"], ["mul", "square"]) == "middle"
    assert left_out(["mul", "sub", "square"], ["sub", "square"]) == "first"
    assert left_out(["mul", "sub", "square"], ["mul", "sub"]) == "last"
    assert left_out(["abs", "abs", "abs"], ["abs", "abs"]) == "other"  # any of the three
    assert left_out(["mul", "sub", "square"], ["add", "sub"]) == "other"
    assert left_out(["mul", "sub", "square"], ["mul"]) == "other"


def test_a_clear_error_names_what_cannot_be_read(tmp_path: Path) -> None:
    with pytest.raises(AnswersError, match=r"no config\.toml"):
        chain_answers(tmp_path, 3)
    root = _run(tmp_path)
    with pytest.raises(AnswersError, match="level: 5 is not a chain level"):
        chain_answers(root, 5)
    with pytest.raises(AnswersError, match="parts: must be >= 1"):
        chain_answers(root, 3, parts=0)
    sets = ["tasks.source=jsonl", "tasks.path=tasks.jsonl", "episode.relabel=off"]
    jsonl = load_train_config(None, sets)
    other = _run(tmp_path / "jsonl", jsonl)
    with pytest.raises(AnswersError, match=r"tasks\.source is 'jsonl'"):
        chain_answers(other, 3)
    result = CliRunner().invoke(cli, ["answers", str(other)])
    assert result.exit_code != 0
    assert "tasks.source is 'jsonl'" in result.output


def test_the_command_prints_a_slice_per_part_and_writes_json(tmp_path: Path) -> None:
    root = _run(tmp_path)
    task = ProceduralTasks(seed=0, max_level=3).task(3, 0)
    with JournalWriter(RunDir(root).log) as log:
        log.append(_record(1, task.id, task.canonical_solution or "", passed=True))
    out = tmp_path / "answers.json"
    result = CliRunner().invoke(cli, ["answers", str(root), "--parts", "1", "--json", str(out)])
    assert result.exit_code == 0, result.output
    assert "1/1" in result.output
    assert '"full_length_passed": 1' in out.read_text()


def _form(tasks: ProceduralTasks, index: int) -> str:
    return chain_form(kind for kind, _ in _chain(tasks, index))


def test_the_last_slice_splits_by_the_forms_of_the_operations(tmp_path: Path) -> None:
    root = _run(tmp_path)
    tasks = ProceduralTasks(seed=0, max_level=3)
    infix = next(i for i in range(500) if _form(tasks, i) == "III")
    called = next(i for i in range(500) if _form(tasks, i) == "ICI")
    with JournalWriter(RunDir(root).log) as log:
        # First half: not counted by form. Second half: three infix chains (one passed, one
        # unreadable), one chain with a call in the middle, written with another length.
        for n in range(1, 5):
            log.append(_record(n, tasks.task(3, called if n % 2 else infix).id, "return x\n"))
        solution = tasks.task(3, infix).canonical_solution or ""
        log.append(_record(5, tasks.task(3, infix).id, solution, passed=True))
        log.append(_record(6, tasks.task(3, infix).id, "    return x +\n"))
        log.append(_record(7, tasks.task(3, called).id, "    return x * 2\n"))
        log.append(_record(8, tasks.task(3, infix).id, "    return -x\n"))
    forms = chain_answers_by_form(root, 3, parts=2)
    assert list(forms) == ["III", "ICI"]  # most drawn first
    assert (forms["III"].attempts, forms["III"].passed, forms["III"].full_length) == (3, 1, 1)
    assert forms["III"].not_a_chain == 1
    assert (forms["ICI"].attempts, forms["ICI"].passed, forms["ICI"].other_length) == (1, 0, 1)
    (whole,) = chain_answers(root, 3, parts=1)
    assert whole.attempts == sum(p.attempts for p in chain_answers_by_form(root, 3, 1).values())
    result = CliRunner().invoke(cli, ["answers", str(root), "--parts", "2", "--by-form"])
    assert result.exit_code == 0, result.output
    assert "by form" in result.output
    assert " III " in result.output
    assert " ICI " in result.output


def test_every_operation_has_a_form_and_an_unknown_one_is_refused() -> None:
    assert [operation_form(k) for k in ("add", "neg", "max", "square", "abs")] == list("INCIC")
    assert chain_form(["add", "neg", "max"]) == "INC"
    with pytest.raises(ValueError, match="'cube' is not one of"):
        operation_form("cube")
