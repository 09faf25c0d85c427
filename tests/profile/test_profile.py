"""`roost profile`: phase percentiles, actor busy time, the learner's critical path, inputs."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from click.testing import CliRunner

from roost.cli import cli
from roost.profile import LearnerStep, ProfileInputError, RolloutTiming, analyze, load_run
from roost.profile.sources import ROLLOUTS, write_jsonl


def _row(i: int, **phases: float) -> RolloutTiming:
    return RolloutTiming(rollout_id=f"r{i}", requested_at=float(i), finished_at=i + 10.0, **phases)


def test_percentiles_shares_and_the_bottleneck_name_the_dominant_phase() -> None:
    rows = [_row(i, generate_s=float(i), exec_s=0.1, queue_wait_s=0.5) for i in range(1, 101)]
    profile = analyze(rows)
    generate = profile.phases["generate"]
    assert generate["p50"] == 50.0
    assert generate["p99"] == 99.0
    assert math.isclose(sum(f["share"] for f in profile.phases.values()), 1.0)
    assert profile.phases["generate"]["share"] > 0.9
    assert profile.bottleneck.startswith("generate:")
    assert profile.critical_path is None


def test_only_completed_rollouts_are_timed_but_every_status_is_counted() -> None:
    rows = [_row(1, exec_s=1.0), _row(2, exec_s=100.0)]
    rows[1] = RolloutTiming(rollout_id="r2", status="failed", exec_s=100.0, finished_at=1.0)
    profile = analyze(rows)
    assert profile.by_status == {"completed": 1, "failed": 1}
    assert profile.phases["exec"]["p99"] == 1.0


def test_the_stacked_breakdown_keeps_each_rollout_in_the_bin_it_finished_in() -> None:
    early = [RolloutTiming(rollout_id=f"e{i}", finished_at=1.0, exec_s=2.0) for i in range(3)]
    late = [RolloutTiming(rollout_id=f"l{i}", finished_at=100.0, generate_s=4.0) for i in range(3)]
    profile = analyze(early + late, bins=2)
    assert profile.stacked["exec"] == [2.0, 0.0]
    assert profile.stacked["generate"] == [0.0, 4.0]


def test_the_learner_wait_is_blamed_on_the_last_rollout_of_its_batch() -> None:
    fast = RolloutTiming(rollout_id="fast", finished_at=1.0, exec_s=1.0)
    slow = RolloutTiming(rollout_id="slow", finished_at=9.0, generate_s=6.0, exec_s=2.0)
    step = LearnerStep(
        version=1,
        wait_started_at=0.0,
        batch_ready_at=9.0,
        finished_at=10.0,
        rollout_ids=["fast", "slow"],
    )
    profile = analyze([fast, slow], steps=[step])
    critical = profile.critical_path
    assert critical is not None
    assert math.isclose(critical["wait_share"], 0.9)
    assert math.isclose(critical["wait_by_phase"]["generate"], 0.75)
    assert math.isclose(critical["wait_by_phase"]["exec"], 0.25)
    assert "mostly on generate" in profile.bottleneck


def test_a_learner_that_computes_most_of_the_step_is_named_as_the_bottleneck() -> None:
    row = RolloutTiming(rollout_id="r", finished_at=1.0, exec_s=1.0)
    step = LearnerStep(
        version=1, wait_started_at=0.0, batch_ready_at=1.0, finished_at=5.0, rollout_ids=["r"]
    )
    profile = analyze([row], steps=[step])
    assert profile.bottleneck.startswith("the learner's own compute (80%")


def test_actor_busy_fraction_and_depth_come_from_metric_snapshots_by_role() -> None:
    def snapshot(t: float, handled: int, depth: int) -> dict[str, object]:
        return {
            "t": t,
            "actor.worker-1.handled": handled,
            "actor.worker-1.handler_s": {"mean": 0.01},
            "actor.worker-1.mailbox_depth": depth,
            "actor.worker-2.handled": 0,
            "actor.worker-2.handler_s": {"mean": None},
            "actor.worker-2.mailbox_depth": 1,
        }

    metrics = [snapshot(0.0, 0, 0), snapshot(1.0, 95, 4), snapshot(2.0, 190, 2)]
    profile = analyze([_row(1, exec_s=1.0)], metrics)
    worker = profile.actors["worker"]
    assert worker["t"] == [1.0, 2.0]
    assert worker["depth"] == [5.0, 3.0]
    # worker-1 is 95% busy; worker-2 never says how long it takes, so it counts as idle.
    assert [round(b, 3) for b in worker["busy"]] == [0.475, 0.475]


def test_a_saturated_role_is_named_in_the_bottleneck_line() -> None:
    metrics = [
        {"t": float(t), "actor.gen.handled": 100 * t, "actor.gen.handler_s": {"mean": 0.0099}}
        for t in range(5)
    ]
    profile = analyze([_row(1, generate_s=1.0)], metrics)
    assert "saturated: gen (busy 99%)" in profile.bottleneck


@pytest.mark.parametrize(
    ("field", "value"), [("exec_s", -1.0), ("generate_s", math.nan), ("finished_at", -5.0)]
)
def test_impossible_timings_are_refused_with_the_field_named(field: str, value: float) -> None:
    with pytest.raises(ValueError, match=field.removesuffix("_s")):
        RolloutTiming(rollout_id="r", **{field: value})


def test_a_torn_last_line_is_dropped_and_a_bad_middle_line_is_named(tmp_path: Path) -> None:
    rows = [_row(i, exec_s=1.0) for i in range(3)]
    write_jsonl(tmp_path / ROLLOUTS, rows)
    with open(tmp_path / ROLLOUTS, "ab") as out:
        out.write(b'{"rollout_id": "torn", "exec')
    assert [r.rollout_id for r in load_run(tmp_path).rollouts] == ["r0", "r1", "r2"]

    text = (tmp_path / ROLLOUTS).read_text().splitlines()
    text[1] = json.dumps({"rollout_id": "r1", "exec_s": -3})
    (tmp_path / ROLLOUTS).write_text("\n".join(text[:3]) + "\n")
    with pytest.raises(ProfileInputError, match=r"rollouts\.jsonl:2: .*exec_s"):
        load_run(tmp_path)


def test_a_run_without_timing_rows_says_how_to_record_them(tmp_path: Path) -> None:
    with pytest.raises(ProfileInputError, match="--profile"):
        load_run(tmp_path)


def test_stress_profile_then_roost_profile_write_the_report(tmp_path: Path) -> None:
    workload = Path(__file__).parents[2] / "scripts" / "workloads" / "mixed.toml"
    runner = CliRunner()
    result = runner.invoke(
        cli,
        [
            "stress",
            "--workload",
            str(workload),
            "--policies",
            "fifo",
            "--rollouts",
            "60",
            "--concurrency",
            "8",
            "--profile",
            str(tmp_path),
        ],
    )
    assert result.exit_code == 0, result.output
    assert "bottleneck:" in result.output
    run_dir = tmp_path / "fifo"
    assert len(load_run(run_dir).rollouts) == 60
    for name in ("profile.html", "profile.json", "profile_stacked.png", "profile_actors.png"):
        assert (run_dir / name).stat().st_size > 0

    again = runner.invoke(cli, ["profile", str(run_dir), "--out", str(tmp_path / "again")])
    assert again.exit_code == 0, again.output
    written = json.loads((tmp_path / "again" / "profile.json").read_text())
    assert written["rollouts"] == 60
    assert written["by_status"] == {"completed": 60}
    assert "bottleneck:" in again.output
