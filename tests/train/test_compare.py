"""`roost compare`: rows from summary.json, pooling by warm start, the gain's interval, and
clear errors for a run directory it cannot read."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from roost.cli import cli
from roost.train.compare import (
    CompareError,
    gain_stats,
    load_run_figures,
    pool_all,
    pool_by_warm_start,
)


def _split(greedy: float, sampled: float, test_only: float | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {"all": {"greedy": greedy, "sampled": sampled}}
    if test_only is not None:
        out["test_only_levels"] = {"greedy": test_only, "sampled": test_only}
    return out


def _run(
    tmp_path: Path,
    name: str,
    sft: tuple[float, float],
    rl: tuple[float, float] | None,
    control: float | None = None,
    se: tuple[float, float] | None = None,
) -> Path:
    run = tmp_path / name
    run.mkdir()
    summary = {
        "name": "default",
        "heldout_pass_rate_after_sft": _split(*sft, test_only=0.05),
        "heldout_pass_rate_after_rl": None if rl is None else _split(*rl, test_only=0.15),
        "heldout_pass_rate_sft_only_control": None if control is None else _split(0, 0, control),
        "versions": 30,
        "wall_seconds": 720.0,
        "heldout_tasks": 90,
        "throughput": {"rollouts_per_s": 17.5, "samples_per_s": 30.0},
        "heldout_by_level": {
            "after_sft": {"1": {"greedy": 1.0, "sampled": 0.98}},
            "after_rl": None if rl is None else {"1": {"greedy": 1.0, "sampled": 0.99}},
        },
        "requested": 10,  # keys a comparison does not read are ignored
    }
    if se is not None:
        summary["heldout_sampled_se"] = {
            "after_sft": {"all": se[0], "test_only_levels": None},
            "after_rl": {"all": se[1]},
        }
    (run / "summary.json").write_text(json.dumps(summary))
    return run


def test_gain_stats_mean_spread_and_interval() -> None:
    stats = gain_stats([1.0, 2.0, 6.0])
    assert stats is not None
    assert stats.n == 3
    assert stats.mean == pytest.approx(3.0)
    assert stats.sd == pytest.approx(math.sqrt(7.0))
    half = 4.303 * math.sqrt(7.0) / math.sqrt(3)  # Student's t, 2 degrees of freedom
    assert stats.low == pytest.approx(3.0 - half)
    assert stats.high == pytest.approx(3.0 + half)
    single = gain_stats([4.0])
    assert single is not None
    assert single.sd is None
    assert single.low is None
    assert gain_stats([]) is None
    with_errors = gain_stats([1.0, 2.0, 6.0], [1.0, 2.0, 2.0])
    assert with_errors is not None
    assert with_errors.eval_sd == pytest.approx(math.sqrt(3.0))
    partial = gain_stats([1.0, 2.0], [1.0, None])
    assert partial is not None
    assert partial.eval_sd is None  # a run without its error: no figure for the pool


def test_runs_pool_by_warm_start_and_unfinished_runs_stay_out(tmp_path: Path) -> None:
    a = load_run_figures(_run(tmp_path, "a", (0.6, 0.5), (0.65, 0.56)))
    b = load_run_figures(_run(tmp_path, "b", (0.6, 0.5), (0.62, 0.53)))
    other = load_run_figures(_run(tmp_path, "c", (0.4, 0.3), (0.45, 0.36)))
    unfinished = load_run_figures(_run(tmp_path, "d", (0.6, 0.5), None))
    assert a.gain("sampled") == pytest.approx(6.0)
    assert b.gain("greedy") == pytest.approx(2.0)
    assert unfinished.gain("sampled") is None
    assert a.gain_se is None  # a summary from before the error was recorded
    pools = pool_by_warm_start([a, other, b, unfinished])
    assert [[run.run for run in pool] for pool in pools] == [[a.run, b.run], [other.run]]
    assert a.sampled_by_level == {"1": (0.98, 0.99)}
    # all three finished runs pooled: gains 6, 3 and 6 sampled, each against its own start
    overall = pool_all(pools)
    assert overall is not None
    assert overall.after_sft is None
    assert overall.runs == [a.run, b.run, other.run]
    assert overall.gain_sampled is not None
    assert overall.gain_sampled.n == 3
    assert overall.gain_sampled.mean == pytest.approx(5.0)
    # one warm start: its pool says it all
    assert pool_all(pool_by_warm_start([a, b, unfinished])) is None


def test_compare_prints_rows_and_writes_pooled_statistics(tmp_path: Path) -> None:
    runs = [
        _run(tmp_path, "a", (0.6, 0.5), (0.65, 0.56), control=0.10, se=(0.006, 0.008)),
        _run(tmp_path, "b", (0.6, 0.5), (0.62, 0.52), control=0.12, se=(0.012, 0.016)),
    ]
    out = tmp_path / "cmp.json"
    result = CliRunner().invoke(
        cli, ["compare", *map(str, runs), "--json", str(out)], env={"COLUMNS": "240"}
    )
    assert result.exit_code == 0, result.output
    assert "+5.0 / +6.0 ± 1.0" in result.output  # 100 * hypot(0.006, 0.008)
    assert "+2.0 / +2.0" in result.output
    assert "2 run(s) from one warm start" in result.output
    written = json.loads(out.read_text())
    assert [row["gain_sampled"] for row in written["runs"]] == pytest.approx([6.0, 2.0])
    (pool,) = written["pools"]
    assert pool["gain_sampled"]["mean"] == pytest.approx(4.0)
    assert pool["gain_sampled"]["n"] == 2
    # the after-RL evaluations' errors, 0.8 and 1.6 points, spread the runs: their root mean
    # square; the after-SFT ones (0.6 and 1.2) are the warm start's, shared by every run
    assert pool["gain_sampled"]["eval_sd"] == pytest.approx(1.6**0.5)
    assert pool["gain_greedy"]["eval_sd"] is None  # greedy decoding has no sampling error
    assert pool["baseline_se"] == pytest.approx(0.9**0.5)
    assert "after-RL evaluation alone: sd 1.3" in result.output
    assert "the warm start's own evaluation error, sampled: ±0.9 points" in result.output
    # RL's test-only levels at 15 % against controls at 10 and 12 %
    assert pool["over_control_sampled"]["mean"] == pytest.approx(4.0)
    assert written["all_runs"] is None  # one warm start
    assert "all 2 runs" not in result.output


def test_compare_pools_runs_of_several_warm_starts(tmp_path: Path) -> None:
    runs = [
        _run(tmp_path, "a", (0.6, 0.5), (0.65, 0.56), se=(0.006, 0.005)),
        _run(tmp_path, "b", (0.6, 0.51), (0.62, 0.53), se=(0.006, 0.005)),  # other draws
        _run(tmp_path, "c", (0.6, 0.52), (0.64, 0.56), se=(0.006, 0.005)),
    ]
    out = tmp_path / "cmp.json"
    result = CliRunner().invoke(
        cli, ["compare", *map(str, runs), "--json", str(out)], env={"COLUMNS": "240"}
    )
    assert result.exit_code == 0, result.output
    assert result.output.count("1 run(s) from one warm start") == 3
    assert "all 3 runs, each gain against its own warm start:" in result.output
    overall = json.loads(out.read_text())["all_runs"]
    assert overall["after_sft"] is None
    assert overall["gain_sampled"]["mean"] == pytest.approx(4.0)  # gains 6, 2 and 4
    assert overall["gain_sampled"]["low"] < 4.0 < overall["gain_sampled"]["high"]
    # some of the runs may share an after-SFT evaluation, some not: no evaluation figure
    assert overall["gain_sampled"]["eval_sd"] is None
    assert overall["baseline_se"] is None


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        (None, "no summary"),
        ("{not json", "not JSON"),
        (
            json.dumps(
                {
                    "heldout_pass_rate_after_sft": {"all": {"greedy": "high", "sampled": 0.5}},
                    "heldout_pass_rate_after_rl": None,
                }
            ),
            "$.heldout_pass_rate_after_sft.all.greedy",
        ),
        (json.dumps({"heldout_pass_rate_after_rl": None}), "heldout_pass_rate_after_sft"),
    ],
    ids=["missing", "not-json", "wrong-type", "missing-key"],
)
def test_an_unreadable_summary_is_named(tmp_path: Path, content: str | None, expected: str) -> None:
    run = tmp_path / "run"
    run.mkdir()
    if content is not None:
        (run / "summary.json").write_text(content)
    with pytest.raises(CompareError, match="not a run directory"):
        load_run_figures(tmp_path / "elsewhere")
    with pytest.raises(CompareError) as caught:
        load_run_figures(run)
    assert str(run / "summary.json") in str(caught.value)
    assert expected in str(caught.value)
    result = CliRunner().invoke(cli, ["compare", str(run)])
    assert result.exit_code == 1
    assert expected in result.output


def test_a_split_without_tasks_has_no_margin(tmp_path: Path) -> None:
    """Every level demonstrated: the test-only split is null, and so is RL's margin there."""
    run = _run(tmp_path, "all-demo", (0.6, 0.5), (0.65, 0.56), control=0.1)
    summary = json.loads((run / "summary.json").read_text())
    for key in ("heldout_pass_rate_after_rl", "heldout_pass_rate_sft_only_control"):
        summary[key]["test_only_levels"] = {"greedy": None, "sampled": None}
    (run / "summary.json").write_text(json.dumps(summary))
    figures = load_run_figures(run)
    assert figures.over_control("sampled") is None
    assert figures.gain("sampled") == pytest.approx(6.0)
    result = CliRunner().invoke(cli, ["compare", str(run)], env={"COLUMNS": "240"})
    assert result.exit_code == 0, result.output
    assert "- / -" in result.output
