"""`roost compare` on bad input: a summary with NaN it never reads, impossible figures, the
same run given twice, an unwritable --json, and the t interval past the table's 30 degrees."""

from __future__ import annotations

import json
import math
import re
import statistics
from pathlib import Path

import pytest
from click.testing import CliRunner

from roost.cli import cli
from roost.train.compare import CompareError, gain_stats, load_run_figures
from tests.train.test_compare import _run


def test_a_nan_in_a_figure_compare_does_not_read_still_loads(tmp_path: Path) -> None:
    run = _run(tmp_path, "a", (0.6, 0.5), (0.65, 0.56))
    summary = json.loads((run / "summary.json").read_text())
    summary["sft"] = {"loss_last": math.nan}  # json.dumps writes NaN, as summary.json does
    (run / "summary.json").write_text(json.dumps(summary))
    assert load_run_figures(run).gain("sampled") == pytest.approx(6.0)


@pytest.mark.parametrize(
    ("field", "value", "path"),
    [
        ("sampled", math.nan, "$.heldout_pass_rate_after_rl.all.sampled"),
        ("sampled", 1.5, "$.heldout_pass_rate_after_rl.all.sampled"),
        ("greedy", -0.1, "$.heldout_pass_rate_after_rl.all.greedy"),
    ],
)
def test_a_pass_rate_that_is_not_a_fraction_is_named(
    tmp_path: Path, field: str, value: float, path: str
) -> None:
    run = _run(tmp_path, "a", (0.6, 0.5), (0.65, 0.56))
    summary = json.loads((run / "summary.json").read_text())
    summary["heldout_pass_rate_after_rl"]["all"][field] = value
    (run / "summary.json").write_text(json.dumps(summary))
    with pytest.raises(CompareError, match=re.escape(path)):
        load_run_figures(run)
    result = CliRunner().invoke(cli, ["compare", str(run)])
    assert result.exit_code == 1
    assert path in result.output
    assert "Traceback" not in result.output


def test_a_negative_wall_time_is_refused(tmp_path: Path) -> None:
    run = _run(tmp_path, "a", (0.6, 0.5), (0.65, 0.56))
    summary = json.loads((run / "summary.json").read_text())
    summary["wall_seconds"] = -3.0
    (run / "summary.json").write_text(json.dumps(summary))
    with pytest.raises(CompareError, match=r"\$\.wall_seconds"):
        load_run_figures(run)


def test_the_same_run_given_twice_is_refused_not_pooled_as_two(tmp_path: Path) -> None:
    run = _run(tmp_path, "a", (0.6, 0.5), (0.65, 0.56))
    result = CliRunner().invoke(cli, ["compare", str(run), f"{run}/"])
    assert result.exit_code == 2
    assert "same run" in result.output
    assert "interval" not in result.output  # nothing pooled


def test_an_unwritable_json_path_is_a_clear_error(tmp_path: Path) -> None:
    run = _run(tmp_path, "a", (0.6, 0.5), (0.65, 0.56))
    blocker = tmp_path / "file"
    blocker.write_text("")
    result = CliRunner().invoke(cli, ["compare", str(run), "--json", str(blocker / "out.json")])
    assert result.exit_code == 1
    assert f"{blocker / 'out.json'}: cannot write" in result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)


def test_the_interval_past_thirty_runs_uses_students_t_not_the_normal() -> None:
    gains = [float(i % 7) for i in range(41)]  # 40 degrees of freedom: t = 2.021
    stats = gain_stats(gains)
    assert stats is not None
    assert stats.high is not None
    half = stats.high - stats.mean
    assert half == pytest.approx(2.021 * statistics.stdev(gains) / math.sqrt(41), rel=1e-3)
    from roost.train.compare import t975

    assert t975(30) == pytest.approx(2.042)
    assert t975(31) == pytest.approx(2.0395, abs=1e-3)
    assert t975(120) == pytest.approx(1.980, abs=1e-3)


def test_zero_spread_gives_a_point_interval_and_nan_gains_are_refused() -> None:
    stats = gain_stats([2.0, 2.0, 2.0])
    assert stats is not None
    assert (stats.sd, stats.low, stats.high) == (0.0, 2.0, 2.0)
    with pytest.raises(ValueError, match="finite"):
        gain_stats([1.0, math.nan])
