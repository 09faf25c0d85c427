"""`roost train --profile`: the run is profiled at its end, into its report, and printed."""

from __future__ import annotations

import io
import json
from pathlib import Path

from click.testing import CliRunner
from rich.console import Console

from roost.cli import cli
from roost.profile import PHASES
from roost.train.config import TrainConfig
from roost.train.profile_export import add_profile_to_report, profile_training_run
from tests.train.conftest import TINY


def test_train_with_profile_writes_the_profile_into_the_report(
    tiny_config: TrainConfig, tmp_path: Path
) -> None:
    config = tmp_path / "tiny.toml"
    config.write_text(TINY)
    out = tmp_path / "run"
    result = CliRunner().invoke(
        cli, ["train", str(config), "--out", str(out), "--profile"], catch_exceptions=False
    )
    assert result.exit_code == 0, result.output
    # The table, as `roost profile RUN_DIR` prints it.
    assert "bottleneck:" in result.output
    for phase in PHASES:
        assert phase in result.output
    profile = json.loads((out / "profile" / "profile.json").read_text())
    summary = json.loads((out / "summary.json").read_text())
    assert profile["rollouts"] == summary["requested"] > 0
    for name in ("profile.html", "profile_phases.png", "profile_stacked.png"):
        assert (out / "profile" / name).stat().st_size > 0, name
    report = (out / "report.html").read_text()
    assert report.count("<h2>Profile</h2>") == 1
    assert "src='profile/profile_phases.png'" in report
    assert report.index("<h2>Profile</h2>") < report.index("</body>")


def test_profiling_twice_leaves_one_section(tmp_path: Path) -> None:
    report = tmp_path / "report.html"
    report.write_text("<html><body><h1>run</h1></body></html>")
    add_profile_to_report(report, "<h2>Profile</h2><p>first</p>")
    add_profile_to_report(report, "<h2>Profile</h2><p>second</p>")
    page = report.read_text()
    assert page.count("<h2>Profile</h2>") == 1
    assert "second" in page
    assert "first" not in page
    assert page.startswith("<html><body><h1>run</h1>")
    assert page.endswith("</body></html>")


def test_a_run_with_nothing_to_profile_says_why(tmp_path: Path) -> None:
    console = Console(record=True, width=200, file=io.StringIO())
    assert profile_training_run(tmp_path, console) == []
    said = console.export_text()
    assert "nothing to profile" in said
    assert "rollouts.jsonl" in said
    assert not (tmp_path / "profile").exists()
