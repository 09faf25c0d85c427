"""`roost answers` on bad input: a run with nothing at the level, more parts than first
attempts (10**8 of them hung), a config error named once, an unwritable --json."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from roost.cli import cli
from roost.train.answers import AnswersError, chain_answers
from roost.train.rundir import RunDir
from runtime.journal import JournalWriter
from tasks import ProceduralTasks
from tests.train.test_answers import _record, _run


def _run_with_attempts(tmp_path: Path, count: int) -> Path:
    root = _run(tmp_path)
    task = ProceduralTasks(seed=0, max_level=3).task(3, 0)
    with JournalWriter(RunDir(root).log) as log:
        for n in range(1, count + 1):
            log.append(_record(n, task.id, task.canonical_solution or "", passed=True))
    return root


def test_a_run_without_scored_rollouts_at_the_level_is_an_error_not_empty_slices(
    tmp_path: Path,
) -> None:
    root = _run(tmp_path)  # stopped before its RL phase: no trajectories.log
    with pytest.raises(AnswersError, match="no scored rollout at level 3"):
        chain_answers(root, 3)
    result = CliRunner().invoke(cli, ["answers", str(root)])
    assert result.exit_code == 1
    assert f"{RunDir(root).log}: no scored rollout at level 3" in result.output


@pytest.mark.parametrize("parts", [3, 100_000_000])
def test_more_parts_than_first_attempts_is_refused(tmp_path: Path, parts: int) -> None:
    root = _run_with_attempts(tmp_path, 2)
    with pytest.raises(AnswersError, match=f"parts: {parts} slices of 2 first attempts"):
        chain_answers(root, 3, parts=parts)
    assert [p.attempts for p in chain_answers(root, 3, parts=2)] == [1, 1]


def test_a_negative_parts_is_a_usage_error(tmp_path: Path) -> None:
    result = CliRunner().invoke(
        cli, ["answers", str(_run_with_attempts(tmp_path, 2)), "--parts", "-3"]
    )
    assert result.exit_code == 2
    assert "--parts" in result.output


def test_a_bad_config_names_its_file_once(tmp_path: Path) -> None:
    root = _run(tmp_path)
    config = RunDir(root).config
    config.write_text("[tasks\nsource=")
    with pytest.raises(AnswersError) as caught:
        chain_answers(root, 3)
    assert str(caught.value).count(str(config)) == 1
    assert "not valid TOML" in str(caught.value)


def test_an_unwritable_json_path_is_a_clear_error(tmp_path: Path) -> None:
    root = _run_with_attempts(tmp_path, 1)
    blocker = tmp_path / "file"
    blocker.write_text("")
    out = blocker / "answers.json"
    result = CliRunner().invoke(cli, ["answers", str(root), "--parts", "1", "--json", str(out)])
    assert result.exit_code == 1
    assert f"{out}: cannot write" in result.output


def test_a_run_log_that_cannot_be_read_is_named(tmp_path: Path) -> None:
    root = _run(tmp_path)
    RunDir(root).log.mkdir()
    result = CliRunner().invoke(cli, ["answers", str(root)])
    assert result.exit_code == 1
    assert f"{RunDir(root).log}: cannot read" in result.output
