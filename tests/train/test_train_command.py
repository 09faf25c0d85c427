"""`roost train` refuses what it cannot run before anything trains: a resume whose `--set`
changes the tasks or their split, and a task source that cannot be used (a malformed task
file, too few tasks, a level with no held-out function). Each is one clear error, and a
refused start leaves no run directory behind."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from roost.cli import cli
from roost.train.config import TrainConfig, load_train_config
from roost.train.run import TrainError
from runtime.config import dump_config
from tests.train.conftest import TINY

TASK = {"prompt": "p", "entry_point": "f", "tests": [{"call": "f(1)", "expected": "2"}]}
JSONL = ["--set", "tasks.source=jsonl", "--set", "episode.relabel=off"]


@pytest.fixture
def started_run(tmp_path: Path) -> Path:
    """A run directory as a stopped run leaves it: its config (the tiny one) and progress."""
    run = tmp_path / "run"
    run.mkdir()
    (run / "config.toml").write_text(dump_config(load_train_config(_tiny(tmp_path))))
    (run / "progress.json").write_text(json.dumps({"segment": 0, "rl": {"done": False}}))
    return run


@pytest.fixture
def trainings(monkeypatch: pytest.MonkeyPatch) -> list[TrainConfig]:
    """The configs `roost train` went on to train with (none, for a refused command)."""
    started: list[TrainConfig] = []

    def record(config: TrainConfig, run_dir: Path) -> dict[str, Any]:
        started.append(config)
        return {"interrupted": True}

    monkeypatch.setattr("roost.commands.train._run", record)
    monkeypatch.setattr("roost.train.report.build_report", lambda run_dir: run_dir / "r.html")
    return started


def _tiny(tmp_path: Path) -> Path:
    path = tmp_path / "tiny.toml"
    path.write_text(TINY)
    return path


def _jsonl(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path


@pytest.mark.parametrize(
    ("overrides", "expected"),
    [
        (["tasks.heldout_percent=20"], ["tasks.heldout_percent: the run has 10, --set gives 20"]),
        (["tasks.levels=[1, 2, 3]"], ["tasks.levels: the run has [1, 2], --set gives [1, 2, 3]"]),
        (["tasks.seed=7"], ["tasks.seed: the run has 0, --set gives 7"]),
        (
            ["tasks.source=jsonl", "tasks.path=more.jsonl", "episode.relabel=off"],
            [
                "tasks.path: the run has '', --set gives 'more.jsonl'",
                "tasks.source: the run has 'procedural', --set gives 'jsonl'",
            ],
        ),
        (
            ["learner.lr=3e-4", "tasks.heldout_per_level=50"],
            ["tasks.heldout_per_level: the run has 3, --set gives 50"],
        ),
    ],
    ids=["split", "levels", "task-seed", "task-file", "with-an-allowed-key"],
)
def test_a_resume_that_changes_the_tasks_is_refused_before_training(
    started_run: Path, trainings: list[TrainConfig], overrides: list[str], expected: list[str]
) -> None:
    recorded = (started_run / "config.toml").read_bytes()
    args = [part for override in overrides for part in ("--set", override)]
    result = CliRunner().invoke(cli, ["train", "--resume", str(started_run), *args])
    assert result.exit_code == 2, result.output
    message = " ".join(result.output.split())  # click wraps long lines
    for change in expected:
        assert change in message
    assert "start a new run with --out" in message
    assert trainings == []
    assert (started_run / "config.toml").read_bytes() == recorded


def test_a_resume_may_change_anything_but_the_tasks(
    started_run: Path, trainings: list[TrainConfig]
) -> None:
    overrides = ["learner.lr=3e-4", "seed=5", "tasks.heldout_percent=10"]  # the last: unchanged
    args = [part for override in overrides for part in ("--set", override)]
    result = CliRunner().invoke(cli, ["train", "--resume", str(started_run), *args])
    assert result.exit_code == 0, result.output
    [config] = trainings
    assert (config.learner.lr, config.seed) == (3e-4, 5)
    assert load_train_config(started_run / "config.toml") == config  # recorded for later resumes


@pytest.mark.parametrize(
    ("rows", "expected"),
    [
        (
            [TASK | {"id": "t1"}, TASK | {"id": 5}],
            ["tasks.path: ", "tasks.jsonl:2: id: Expected `str`, got `int`"],
        ),
        (
            [TASK | {"id": "t1"}],
            ["tasks.path: ", "has 1 tasks", "need at least one for training and one held out"],
        ),
    ],
    ids=["malformed-line", "one-task"],
)
def test_an_unusable_task_file_is_one_error_and_leaves_no_run(
    tmp_path: Path, rows: list[dict[str, Any]], expected: list[str]
) -> None:
    path = _jsonl(tmp_path / "tasks.jsonl", rows)
    out = tmp_path / "run"
    args = ["train", str(_tiny(tmp_path)), "--out", str(out), *JSONL, "--set", f"tasks.path={path}"]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 1, result.output
    message = " ".join(result.output.split())  # click wraps long lines
    for part in expected:
        assert part in message
    assert "Traceback" not in result.output
    assert isinstance(result.exception, SystemExit)  # click's error exit: nothing escaped
    assert not out.exists()


def test_a_level_with_no_held_out_function_is_one_error_and_leaves_no_run(
    tmp_path: Path,
) -> None:
    # In a child process with a deadline: the task sets are built in a worker thread, where
    # an endless draw (the bug) could not be interrupted in this one.
    out = tmp_path / "run"
    args = [str(_tiny(tmp_path)), "--out", str(out), "--set", "tasks.heldout_percent=1"]
    result = subprocess.run(
        [sys.executable, "-m", "roost", "train", *args],
        capture_output=True,
        text=True,
        timeout=90,
        check=False,
    )
    assert result.returncode == 1, result.stderr[-2000:]
    assert "tasks.heldout_percent: at 1, level 1 has no held-out function" in result.stderr
    assert "Traceback" not in result.stderr
    assert not out.exists()


def test_the_same_out_runs_once_the_task_file_is_fixed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = _jsonl(tmp_path / "tasks.jsonl", [TASK | {"id": "t1"}, TASK | {"id": 5}])
    out = tmp_path / "run"
    args = ["train", str(_tiny(tmp_path)), "--out", str(out), *JSONL, "--set", f"tasks.path={path}"]
    assert CliRunner().invoke(cli, args).exit_code == 1

    # The rerun gets past the task file to the sandbox check, where a stand-in stops it.
    async def no_sandbox(pool: object, key: str) -> None:
        raise TrainError("sandbox: stopped here by the test")

    monkeypatch.setattr("roost.train.run._preflight", no_sandbox)
    _jsonl(path, [TASK | {"id": f"t{i}"} for i in range(4)])
    result = CliRunner().invoke(cli, args)
    assert "already holds a run" not in result.output
    assert "sandbox: stopped here by the test" in result.output
    assert (out / "config.toml").exists()


def test_a_report_that_fails_after_the_run_is_named_and_the_resume_hint_still_shown(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The run and its summary are written by then: a damaged metrics line used to end the
    # command with a traceback that hid the summary's path and how to resume.
    from roost.train.report import ReportError

    def broken(run_dir: Path) -> Path:
        raise ReportError(f"{run_dir / 'metrics.jsonl'}:3: not JSON")

    monkeypatch.setattr("roost.commands.train._run", lambda config, run_dir: {"interrupted": True})
    monkeypatch.setattr("roost.train.report.build_report", broken)
    out = tmp_path / "run"
    result = CliRunner().invoke(cli, ["train", str(_tiny(tmp_path)), "--out", str(out)])
    assert result.exit_code == 1, result.output
    assert f"report: not built: {out / 'metrics.jsonl'}:3: not JSON" in result.output
    assert f"continue with: roost train --resume {out}" in result.output
    assert f"`roost report {out}` retries" in result.output
