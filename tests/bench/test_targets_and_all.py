"""Targets and their verdicts, and `roost bench all` with a missing or broken suite."""

from __future__ import annotations

import json
import sys
import types
from pathlib import Path

import pytest
from click.testing import CliRunner

from roost.bench import all as suites
from roost.bench.targets import Target, gross_regressions, targets_of, verdicts
from roost.commands.bench import bench


def test_a_ratio_is_a_gross_regression_only_below_half_its_target() -> None:
    target = Target("ratio", 0.8, "higher")
    assert gross_regressions([target], {"ratio": 0.41}) == []
    problems = gross_regressions([target], {"ratio": 0.39})
    assert len(problems) == 1
    assert "ratio = 0.39" in problems[0]
    assert "ratio >= 0.8" in problems[0]


def test_a_cost_is_a_gross_regression_only_above_twice_its_target() -> None:
    target = Target("sim.loop_lag_p99_ms", 20.0, "lower")
    assert gross_regressions([target], {"sim": {"loop_lag_p99_ms": 39.0}}) == []
    assert gross_regressions([target], {"sim": {"loop_lag_p99_ms": 41.0}})


def test_the_guard_judges_a_target_by_its_guard_figure_when_it_has_one() -> None:
    target = Target("sim.lag", 20.0, "lower", guard="sim.own_lag")
    assert gross_regressions([target], {"sim": {"lag": 900.0, "own_lag": 5.0}}) == []
    problems = gross_regressions([target], {"sim": {"lag": 5.0, "own_lag": 900.0}})
    assert problems[0].startswith("sim.own_lag = 900")
    assert verdicts([target], {"sim": {"lag": 900.0, "own_lag": 5.0}})[0]["met"] is False


def test_a_target_of_zero_failures_allows_none() -> None:
    target = Target("process.failures", 0.0, "lower")
    assert gross_regressions([target], {"process": {"failures": 0}}) == []
    assert gross_regressions([target], {"process": {"failures": 1}})


def test_an_absent_figure_is_reported_not_passed() -> None:
    target = Target("process.failures", 0.0, "lower")
    result = {"process": {"missing": "bubblewrap (bwrap) is not installed"}}
    assert "absent" in gross_regressions([target], result)[0]
    assert verdicts([target], result) == [
        {
            "figure": "process.failures",
            "target": "process.failures <= 0",
            "value": None,
            "met": None,
        }
    ]


def test_verdicts_say_met_or_missed() -> None:
    lines = verdicts([Target("a", 1.0, "higher"), Target("b", 1.0, "higher")], {"a": 1.2, "b": 0.9})
    assert [line["met"] for line in lines] == [True, False]


def test_a_suite_module_may_declare_its_own_targets() -> None:
    module = types.SimpleNamespace(TARGETS=[Target("x", 3.0, "higher")])
    assert targets_of("runtime", module) == [Target("x", 3.0, "higher")]
    assert targets_of("runtime", None)[0].figure == "pipeline_ratio"


@pytest.fixture
def fake_suites(monkeypatch: pytest.MonkeyPatch) -> None:
    good = types.ModuleType("roost_fake_good")
    good.run = lambda *, quick=False, repeats=None: {"ratio": 2.0, "quick": quick}  # type: ignore[attr-defined]
    good.TARGETS = [Target("ratio", 1.0, "higher")]  # type: ignore[attr-defined]
    broken = types.ModuleType("roost_fake_broken")

    def explode(*, quick: bool = False, repeats: int | None = None) -> dict[str, object]:
        raise RuntimeError("the suite broke")

    broken.run = explode  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "roost_fake_good", good)
    monkeypatch.setitem(sys.modules, "roost_fake_broken", broken)
    monkeypatch.setattr(
        suites,
        "SUITES",
        {
            "good": "roost_fake_good",
            "absent": "roost_fake_absent_suite",
            "broken": "roost_fake_broken",
        },
    )


@pytest.mark.usefixtures("fake_suites")
def test_all_reports_a_missing_suite_and_an_error_and_runs_the_rest() -> None:
    document = suites.run(quick=True)
    assert document["missing"] == ["absent"]
    assert "not in this checkout" in document["suites"]["absent"]["missing"]
    assert document["errors"] == ["broken"]
    assert "RuntimeError: the suite broke" in document["suites"]["broken"]["error"]
    assert document["suites"]["good"]["result"] == {"ratio": 2.0, "quick": True}
    assert document["targets"] == [
        {"suite": "good", "figure": "ratio", "target": "ratio >= 1", "value": 2.0, "met": True}
    ]


def test_all_refuses_an_unknown_suite_by_name() -> None:
    with pytest.raises(ValueError, match="unknown suites \\['nope'\\]"):
        suites.run(suites=["nope"])


@pytest.mark.usefixtures("fake_suites")
def test_bench_all_writes_one_file_and_fails_when_a_suite_failed(tmp_path: Path) -> None:
    out = tmp_path / "sub" / "bench.json"
    outcome = CliRunner().invoke(bench, ["all", "--json", str(out), "--quick"])
    assert outcome.exit_code == 1
    assert "suites failed: broken" in outcome.output
    document = json.loads(out.read_text())
    assert set(document["suites"]) == {"good", "absent", "broken"}
    assert document["missing"] == ["absent"]
