"""`roost profile` on bad input: metric snapshots with values `analyze` cannot compute with,
JSON nested past the parser's depth, an input that is not a file, and a --bins out of range."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from roost.cli import cli
from roost.profile import ProfileInputError, RolloutTiming, load_run
from roost.profile.sources import METRICS, ROLLOUTS, write_jsonl


def _run(tmp_path: Path, metrics: bytes | None = None) -> Path:
    write_jsonl(
        tmp_path / ROLLOUTS,
        [RolloutTiming(rollout_id="r0", finished_at=1.0, generate_s=1.0)],
    )
    if metrics is not None:
        (tmp_path / METRICS).write_bytes(metrics)
    return tmp_path


def _profile(*args: str) -> Result:
    return CliRunner().invoke(cli, ["profile", *args])


def _fails_naming(result: Result, text: str) -> None:
    assert result.exit_code == 1, result.output
    assert text in result.output
    assert isinstance(result.exception, SystemExit)  # a ClickException, not a traceback


@pytest.mark.parametrize(
    ("metrics", "expected"),
    [
        (b'{"t": "x"}\n{"t": 1.0}\n', "metrics.jsonl:1: t: expected a finite number"),
        (
            b'{"t": 0.0}\n{"t": 1.0, "actor.worker-1.handled": "abc"}\n',
            "metrics.jsonl:2: actor.worker-1.handled: expected a finite number",
        ),
        (b"[" * 100_000 + b"]" * 100_000 + b"\n", "metrics.jsonl:1: nested too deeply"),
    ],
    ids=["time-not-a-number", "counter-not-a-number", "nested-too-deeply"],
)
def test_a_metric_snapshot_analyze_cannot_use_is_named(
    tmp_path: Path, metrics: bytes, expected: str
) -> None:
    run = _run(tmp_path, metrics)
    with pytest.raises(ProfileInputError, match=re.escape(expected.split(":")[0])):
        load_run(run)
    _fails_naming(_profile(str(run)), expected)


def test_timing_rows_that_are_not_a_file_are_named(tmp_path: Path) -> None:
    (tmp_path / ROLLOUTS).mkdir()
    _fails_naming(_profile(str(tmp_path)), f"{tmp_path / ROLLOUTS}: cannot read")


@pytest.mark.parametrize("bins", ["0", "-1", "100000000"])
def test_bins_out_of_range_is_a_usage_error_not_a_hang(tmp_path: Path, bins: str) -> None:
    result = _profile(str(_run(tmp_path)), "--bins", bins)
    assert result.exit_code == 2, result.output
    assert "--bins" in result.output


def test_an_out_directory_that_cannot_be_made_is_named(tmp_path: Path) -> None:
    run = _run(tmp_path)
    blocker = tmp_path / "file"
    blocker.write_text("")
    result = _profile(str(run), "--out", str(blocker / "profile"))
    _fails_naming(result, "cannot write the profile")
    assert str(blocker) in result.output
