"""The run's time limit: the RL phase gets what the rest of the run leaves, set once per run."""

from __future__ import annotations

import json
from pathlib import Path

import msgspec
import pytest

from roost.train.budget import EVAL_SLACK, FINISH_MARGIN_S, rl_budget_s
from roost.train.config import TrainConfig
from roost.train.report import build_report
from roost.train.run import TrainHooks, train
from roost.train.rundir import RunDir


def _config(
    *, limit: float, cap: float = 600.0, drain: float = 30.0, control: bool = False
) -> TrainConfig:
    base = TrainConfig()
    rl = msgspec.structs.replace(base.rl, time_budget_s=cap, drain_timeout_s=drain)
    return msgspec.structs.replace(base, time_limit_s=limit, rl=rl, control=control)


def test_without_a_limit_rl_gets_its_budget() -> None:
    config = _config(limit=0.0, cap=480.0)
    assert rl_budget_s(config, spent_s=10_000.0, eval_s=100.0) == 480.0


def test_a_limit_with_room_to_spare_leaves_the_budget_alone() -> None:
    config = _config(limit=3600.0, cap=600.0)
    assert rl_budget_s(config, spent_s=230.0, eval_s=17.0) == 600.0


def test_a_limit_shortens_rl_by_what_comes_after_it() -> None:
    config = _config(limit=840.0, cap=600.0, drain=30.0)
    budget = rl_budget_s(config, spent_s=230.0, eval_s=18.0)
    assert budget == pytest.approx(840.0 - 230.0 - 30.0 - EVAL_SLACK * 18.0 - FINISH_MARGIN_S)
    assert 0 < budget < 600.0
    # The run's end as reserved: every later part at its bound or its estimate.
    assert 230.0 + budget + 30.0 + EVAL_SLACK * 18.0 + FINISH_MARGIN_S == pytest.approx(840.0)


def test_with_a_control_rl_and_the_control_share_what_is_left() -> None:
    alone = rl_budget_s(_config(limit=2000.0, cap=5000.0), spent_s=300.0, eval_s=20.0)
    paired = rl_budget_s(
        _config(limit=2000.0, cap=5000.0, control=True), spent_s=300.0, eval_s=20.0
    )
    # The control trains for RL's wall time and is evaluated too.
    assert paired == pytest.approx((alone - EVAL_SLACK * 20.0) / 2)
    end = 300.0 + 2 * paired + 30.0 + 2 * EVAL_SLACK * 20.0 + FINISH_MARGIN_S
    assert end == pytest.approx(2000.0)


def test_a_limit_already_spent_leaves_rl_nothing() -> None:
    assert rl_budget_s(_config(limit=600.0), spent_s=700.0, eval_s=10.0) == 0.0


@pytest.mark.anyio
async def test_a_run_out_of_time_skips_rl_and_still_reports_everything(
    tiny_config: TrainConfig, tmp_path: Path
) -> None:
    # A limit the warm start alone exceeds: RL gets no time and starts no episode; the run
    # still ends with its summary and report, and no "after RL" figure for an RL never run.
    config = msgspec.structs.replace(tiny_config, time_limit_s=1.0)
    out = tmp_path / "run"
    summary = await train(config, out)
    assert summary["rl_budget_s"] == 0.0
    assert summary["time_limit_s"] == 1.0
    assert summary["versions"] == summary["rl_seconds"] == 0
    assert summary["requested"] == summary["scored"] + summary["failed"] + summary["cancelled"]
    assert summary["requested"] == 0
    assert summary["heldout_pass_rate_after_sft"] is not None
    assert summary["heldout_pass_rate_after_rl"] is None
    build_report(out)
    assert RunDir(out).report.stat().st_size > 0


@pytest.mark.anyio
async def test_a_generous_limit_leaves_the_rl_budget_and_a_resume_keeps_it(
    tiny_config: TrainConfig, tmp_path: Path
) -> None:
    out = tmp_path / "run"
    run = RunDir(out)
    hooks = TrainHooks()

    def stop_at_one(version: int) -> None:
        if version >= 1:
            hooks.stop.set()

    hooks.on_version = stop_at_one
    config = msgspec.structs.replace(tiny_config, time_limit_s=3600.0)
    await train(config, out, hooks=hooks)
    progress = json.loads(run.progress_file.read_text())
    assert progress["rl"]["done"] is False
    assert progress["rl"]["budget_s"] == config.rl.time_budget_s
    # The budget is set when RL first starts: a resume finishes that phase, whatever the
    # limit would give it now (here, as if the first segment had been given 45 s).
    progress["rl"]["budget_s"] = 45.0
    run.write_progress(progress)
    summary = await train(msgspec.structs.replace(config, time_limit_s=1.0), out)
    assert summary["rl_budget_s"] == 45.0
    assert summary["versions"] >= config.rl.max_versions
    assert summary["requested"] == summary["scored"] + summary["failed"] + summary["cancelled"]
