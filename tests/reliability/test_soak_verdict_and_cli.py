"""The soak's verdict when it has too little to compare, and `scripts/soak`'s refusal of bad
durations (before any sandbox starts: `run_soak` is replaced by a stand-in)."""

from __future__ import annotations

from typing import Any

import pytest
from click.testing import CliRunner

from roost.reliability import soak_cli
from roost.reliability.soak import SoakConfig, SoakReport
from tests.reliability.test_soak import _sample


def test_one_checkpoint_after_the_baseline_is_too_few_to_pass_a_leak() -> None:
    # start, warm-up, baseline, then one checkpoint where open files grew: the last two
    # checkpoints include the baseline itself, so no growth can be shown either way.
    report = SoakReport(SoakConfig(warmup_checkpoints=1), submitted=5, finished=5)
    report.samples = [_sample(0), _sample(1), _sample(2), _sample(3, open_files=40)]
    assert report.growth() == {}
    problems = report.problems()
    assert len(problems) == 1
    assert "too few to judge growth" in problems[0]


def test_two_checkpoints_after_the_baseline_are_judged() -> None:
    report = SoakReport(SoakConfig(warmup_checkpoints=1), submitted=5, finished=5)
    report.samples = [_sample(0), _sample(1), _sample(2), _sample(3), _sample(4)]
    assert report.growth()["open_files"] == 0
    assert report.problems() == []


@pytest.fixture
def soak_calls(monkeypatch: pytest.MonkeyPatch) -> list[SoakConfig]:
    calls: list[SoakConfig] = []

    async def fake_run_soak(config: SoakConfig, **_: Any) -> SoakReport:
        calls.append(config)
        report = SoakReport(config, submitted=1, finished=1)
        report.samples = [_sample(i) for i in range(5)]
        return report

    monkeypatch.setattr(soak_cli, "run_soak", fake_run_soak)
    return calls


@pytest.mark.parametrize(
    ("args", "named"),
    [
        (["--seconds", "0"], "--seconds"),  # once silently the 10-minute default
        (["--minutes", "0"], "--minutes"),
        (["--seconds", "nan"], "--seconds"),  # once a soak that never reached its end
        (["--seconds", "inf"], "--seconds"),
        (["--seconds", "30", "--interval", "nan"], "--interval"),
        (["--seconds", "30", "--concurrency", "0"], "--concurrency"),
    ],
)
def test_a_bad_duration_is_refused_naming_the_option(
    soak_calls: list[SoakConfig], args: list[str], named: str
) -> None:
    result = CliRunner().invoke(soak_cli.main, args)
    assert result.exit_code == 2, result.output
    assert named in result.output
    assert soak_calls == []


def test_seconds_and_minutes_add_up_and_the_default_is_ten_minutes(
    soak_calls: list[SoakConfig],
) -> None:
    runner = CliRunner()
    assert runner.invoke(soak_cli.main, ["--minutes", "1", "--seconds", "30"]).exit_code == 0
    assert runner.invoke(soak_cli.main, []).exit_code == 0
    assert [c.duration_s for c in soak_calls] == [90.0, 600.0]
