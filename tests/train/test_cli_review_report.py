"""`roost report` on bad input: a corrupt progress.json or metrics.jsonl is one error naming
the file (and line), a run stopped before any data still gets its report, and a report that
cannot be written says where."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from roost.cli import cli
from roost.train.config import load_train_config
from roost.train.report import PLOTS, ReportError, build_report
from roost.train.rundir import RunDir
from runtime.config import dump_config


def _run(tmp_path: Path) -> RunDir:
    """A run killed right after it started: its config and nothing else."""
    run = RunDir(tmp_path / "run")
    run.root.mkdir(parents=True)
    run.config.write_text(dump_config(load_train_config(None)))
    return run


def _report(run: RunDir) -> Result:
    return CliRunner().invoke(cli, ["report", str(run.root)])


def _fails_naming(result: Result, text: str) -> None:
    assert result.exit_code == 1, result.output
    assert text in result.output
    assert isinstance(result.exception, SystemExit)  # a ClickException, not a traceback


def test_a_corrupt_progress_file_is_named(tmp_path: Path) -> None:
    run = _run(tmp_path)
    run.progress_file.write_text('{"segm')
    with pytest.raises(ReportError, match=r"progress\.json: unreadable JSON"):
        build_report(run.root)
    _fails_naming(_report(run), f"{run.progress_file}: unreadable JSON")


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        (b"\xff\xfe not text", "metrics.jsonl:2"),
        (b"5", "metrics.jsonl:2: expected a JSON object, got int"),
        (b'{"pool.busy": 3}', "metrics.jsonl:2: t:"),
        (b'{"t": "soon"}', "metrics.jsonl:2: t:"),
        (b'{"t": 1.0, "pool.busy": "x"}', "metrics.jsonl:2: pool.busy:"),
        (b'{"t": 1.0, "loop_lag_s": 5}', "metrics.jsonl:2: loop_lag_s:"),
    ],
    ids=["not-utf8", "not-an-object", "no-time", "time-not-a-number", "busy", "lag"],
)
def test_a_corrupt_metrics_line_is_named_with_its_number(
    tmp_path: Path, line: bytes, expected: str
) -> None:
    run = _run(tmp_path)
    run.metrics.write_bytes(b'{"t": 0.0, "pool.busy": 1}\n' + line + b'\n{"t": 2.0}\n')
    with pytest.raises(ReportError, match=re.escape(expected.split(":")[0])):
        build_report(run.root)
    _fails_naming(_report(run), expected)


def test_a_torn_last_metrics_line_is_dropped(tmp_path: Path) -> None:
    run = _run(tmp_path)
    run.metrics.write_bytes(b'{"t": 0.0, "pool.busy": 1}\n{"t": 1.0, "pool.bu')
    assert build_report(run.root) == run.report


def test_a_run_stopped_before_any_data_is_reported_without_warnings(tmp_path: Path) -> None:
    # pytest turns warnings into errors: an empty legend (no evaluation, no timings) was one
    run = _run(tmp_path)
    assert build_report(run.root) == run.report
    assert all((run.root / name).stat().st_size > 0 for name in PLOTS)
    assert "Held-out pass rate" in run.report.read_text()


def test_a_report_that_cannot_be_written_is_named(tmp_path: Path) -> None:
    run = _run(tmp_path)
    run.report.mkdir()  # something in the way of report.html
    _fails_naming(_report(run), f"{run.report}: Is a directory (rebuilding the report)")


def test_a_run_log_that_cannot_be_read_is_named(tmp_path: Path) -> None:
    run = _run(tmp_path)
    run.log.mkdir()
    _fails_naming(_report(run), f"{run.log}: Is a directory")
