"""`roost stress` on bad input: workload values that failed only mid-simulation (as a
traceback out of the actor system), an empty or repeated policy list, an unwritable --json."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from roost.cli import cli
from roost.stress.workload import WorkloadError, load_workload

WORKLOADS = Path(__file__).parents[2] / "scripts" / "workloads"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            "name = 'x'\n[scheduler.policy_options]\npriority = { bogus = 1.0 }",
            r"scheduling policy 'priority': bad options: .*bogus.* - at `\$.scheduler`",
        ),
        (
            "name = 'x'\n[scheduler.policy_options]\nlifo = { x = 1.0 }",
            r"unknown scheduling policy 'lifo'",
        ),
        ("name = 'x'\n[scheduler]\nsweep_interval_s = 0", "sweep_interval_s: must be finite"),
        ("name = 'x'\n[scheduler]\nmax_retries = -1", "max_retries: must be >= 0"),
        ("name = 'x'\n[scheduler]\nbackoff_s = 90.0", "need 0 <= backoff_s <= backoff_max_s"),
        ("name = 'x'\n[scheduler]\nlost_after_s = nan", "lost_after_s: must be finite"),
        ("name = 'x'\n[scheduler.quotas]\ngroup = { default = 0 }", "quotas.group.default"),
        ("name = 'x'\nmax_steps = 0", "max_steps: must be >= 1"),
        ("name = 'x'\ndeadline_s = -5.0", "deadline_s: must be finite and > 0"),
        (
            "name = 'x'\n[[groups]]\nname = 'g'\nmax_steps = 0",
            r"max_steps: must be >= 1, got 0 - at `\$.groups\[0\]`",
        ),
        (
            "name = 'x'\n[[groups]]\nname = 'g'\ndeadline_s = inf",
            r"deadline_s: must be finite and > 0, got inf - at `\$.groups\[0\]`",
        ),
    ],
)
def test_a_value_the_simulation_cannot_run_is_refused_when_the_file_is_read(
    tmp_path: Path, text: str, message: str
) -> None:
    path = tmp_path / "bad.toml"
    path.write_text(text)
    with pytest.raises(WorkloadError, match=message):
        load_workload(path)
    result = CliRunner().invoke(
        cli, ["stress", "--workload", str(path), "--rollouts", "5", "--policies", "priority"]
    )
    assert result.exit_code == 1, result.output
    assert "bad.toml" in result.output
    assert isinstance(result.exception, SystemExit)  # a ClickException, not a traceback


@pytest.mark.parametrize(
    ("policies", "message"),
    [(",", "no policy named in ','"), ("fifo,fifo", "fifo named twice")],
)
def test_an_empty_or_repeated_policy_list_is_a_usage_error(policies: str, message: str) -> None:
    result = CliRunner().invoke(
        cli, ["stress", "--workload", str(WORKLOADS / "mixed.toml"), "--policies", policies]
    )
    assert result.exit_code == 2
    assert message in result.output


def test_an_unwritable_json_path_is_a_clear_error(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    out = blocker / "stress.json"
    result = CliRunner().invoke(
        cli,
        [
            "stress",
            "--workload",
            str(WORKLOADS / "mixed.toml"),
            "--rollouts",
            "5",
            "--policies",
            "fifo",
            "--json",
            str(out),
        ],
    )
    assert result.exit_code == 1
    assert f"{out}: cannot write" in result.output
