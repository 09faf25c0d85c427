"""`train` end to end on a tiny config: every file of the run directory, counts that add up,
held-out pass rates of the specified shape, and records that carry timings and versions."""

from __future__ import annotations

import collections
import json
from pathlib import Path
from typing import Any

import msgspec
import pytest
import torch

from actors.learner import load_checkpoint
from roost.train.config import TrainConfig
from roost.train.lineage import trace_lineage
from roost.train.records import EvalRecord, StepRecord, TrajectoryRecord
from roost.train.report import PLOTS, build_report
from roost.train.run import _latest_policy, train
from roost.train.rundir import RunDir
from roost.train.summary import load_run_records

pytestmark = pytest.mark.anyio

SUMMARY_KEYS = {
    "heldout_pass_rate_after_sft",
    "heldout_pass_rate_after_rl",
    "heldout_pass_rate_sft_only_control",
    "requested",
    "scored",
    "failed",
    "cancelled",
    "max_staleness_seen",
    "throughput",
}


def _check_rates(rates: object) -> None:
    assert isinstance(rates, dict)
    assert set(rates) == {"all", "demo_levels", "test_only_levels"}
    for split in rates.values():
        assert set(split) == {"greedy", "sampled"}
        for value in split.values():
            assert 0.0 <= value <= 1.0


async def test_tiny_run_writes_every_file_and_the_counts_add_up(
    tiny_config: TrainConfig, tmp_path: Path
) -> None:
    out = tmp_path / "run"
    summary = await train(tiny_config, out)
    build_report(out)
    run = RunDir(out)
    for path in (run.config, run.metrics, run.log, run.summary, run.report, run.sft_weights):
        assert path.is_file(), path
        assert path.stat().st_size > 0, path
    assert list(run.checkpoints.glob("ckpt-*.pt"))
    for plot in PLOTS:
        assert (out / plot).stat().st_size > 0
        assert plot in run.report.read_text()

    on_disk = json.loads(run.summary.read_text())
    assert set(on_disk) >= SUMMARY_KEYS
    assert on_disk["requested"] == summary["requested"] > 0
    assert on_disk["requested"] == on_disk["scored"] + on_disk["failed"] + on_disk["cancelled"]
    assert on_disk["scored"] > 0
    assert on_disk["balanced"]
    _check_rates(on_disk["heldout_pass_rate_after_sft"])
    _check_rates(on_disk["heldout_pass_rate_after_rl"])
    assert on_disk["heldout_pass_rate_sft_only_control"] is None
    for stage in ("after_sft", "after_rl"):  # at most 0.5 / sqrt(tasks x (draws - 1))
        errors = on_disk["heldout_sampled_se"][stage]
        assert set(errors) == {"all", "demo_levels", "test_only_levels"}
        assert all(0.0 <= e <= 0.5 for e in errors.values())
    assert " ± " in run.report.read_text()
    assert 0 <= on_disk["max_staleness_seen"] <= tiny_config.learner.k
    assert on_disk["versions"] >= tiny_config.rl.max_versions
    # Each version's 4 episodes come in at least two groups of 2: one step on each half.
    assert on_disk["optimizer_steps"] == 2 * on_disk["versions"]
    machine = on_disk["machines"]["0"]
    assert machine["device"] == ("cuda" if torch.cuda.is_available() else "cpu")
    assert machine["cpus"] >= 1
    assert machine["torch"] == torch.__version__

    records, problems = load_run_records(run)
    assert problems == []
    trajectories = [r for r in records if isinstance(r, TrajectoryRecord)]
    assert len({r.rollout_id for r in trajectories}) == len(trajectories) == on_disk["requested"]
    # Written when scored, with no consumption yet: the step records name what they trained.
    assert all(r.consumed_version is None for r in trajectories)
    trajectories = trace_lineage(records).trajectories
    scored = [r for r in trajectories if r.status == "scored"]
    for record in scored:
        assert record.turns
        assert record.generate_s > 0
        if not all(t.reused for t in record.turns):  # a reused verdict runs nothing
            assert record.exec_s > 0
        assert record.generate_s == pytest.approx(sum(t.generate_s for t in record.turns))
        for turn in record.turns:
            assert 0 <= turn.min_version <= turn.max_version <= on_disk["versions"]
    reused = sum(t.reused for r in scored for t in r.turns)
    assert on_disk["reused_verdicts"] == reused <= on_disk["samples"]
    assert on_disk["samples"] == sum(len(r.turns) for r in scored)
    consumed = [r for r in scored if r.consumed_version is not None]
    assert consumed
    # Every step trains on at least `batch_size` episodes (the unit admission counts), however
    # many model turns each took: a batch counted in samples stepped on two 2-turn episodes.
    per_step = collections.Counter(r.consumed_version for r in consumed)
    assert min(per_step.values()) >= tiny_config.learner.batch_size, per_step
    assert all(r.learner_wait_s is not None and r.learner_wait_s >= 0 for r in consumed)
    versions = [r.version for r in records if isinstance(r, StepRecord)]
    assert versions == list(range(1, on_disk["versions"] + 1))
    assert {r.stage for r in records if isinstance(r, EvalRecord)} == {"after_sft", "after_rl"}

    # "After RL" is the learner's moving average of the weights, which the checkpoint keeps.
    assert on_disk["after_rl_weights"] == "moving average, decay 0.97"
    assert run.read_progress()["evals"]["after_rl"]["weights"] == on_disk["after_rl_weights"]
    ckpt = load_checkpoint(run.checkpoints)
    assert ckpt.average is not None
    assert any(not torch.equal(ckpt.average[k], ckpt.model[k]) for k in ckpt.model)
    evaluated = _latest_policy(tiny_config, run)
    assert evaluated is not None
    assert evaluated[1] == "moving average, decay 0.97"
    assert all(torch.equal(v, ckpt.average[k]) for k, v in evaluated[0].state_dict().items())
    # A checkpoint without an average (written before the learner kept one) is scored on its
    # last weights, and says so.
    assert ckpt.path is not None
    old = torch.load(ckpt.path, weights_only=False)
    old.pop("average")
    torch.save(old, run.checkpoints / "ckpt-99999999.pt")
    fallback = _latest_policy(tiny_config, run)
    assert fallback is not None
    assert fallback[1] == "last"
    assert all(torch.equal(v, ckpt.model[k]) for k, v in fallback[0].state_dict().items())

    lines = [json.loads(line) for line in run.metrics.read_text().splitlines()]
    assert any("actor.generator.mailbox_depth" in line for line in lines)
    assert any("actor.learner.handler_s" in line for line in lines)


async def test_report_rebuilds_from_the_run_directory(
    tiny_config: TrainConfig, tmp_path: Path
) -> None:
    out = tmp_path / "run"
    await train(tiny_config, out)
    for plot in PLOTS:
        (out / plot).unlink(missing_ok=True)
    (out / "summary.json").unlink()
    build_report(out)
    assert all((out / plot).is_file() for plot in PLOTS)
    assert json.loads((out / "summary.json").read_text())["scored"] > 0


async def test_sync_run_never_trains_a_stale_sample(
    tiny_config: TrainConfig, tmp_path: Path
) -> None:
    config = msgspec.structs.replace(
        tiny_config, learner=msgspec.structs.replace(tiny_config.learner, k=0)
    )
    out = tmp_path / "run"
    summary = await train(config, out)
    assert summary["versions"] >= config.rl.max_versions
    assert summary["max_staleness_seen"] == 0
    progress = json.loads((out / "progress.json").read_text())
    learner = progress["rl"]["segments"][0]["learner"]
    assert learner["dropped_stale"] == 0
    assert set(learner["staleness"]) == {"0"}


async def _run_losing_nothing(config: TrainConfig, out: Path) -> list[dict[str, Any]]:
    """Train `config` into `out`: it reaches its versions, every request ends once and none
    fails; returns the run's metrics lines."""
    summary = await train(config, out)
    assert summary["versions"] >= config.rl.max_versions
    assert summary["requested"] == summary["scored"] + summary["failed"] + summary["cancelled"]
    assert summary["failed"] == 0
    return [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]


async def test_a_run_with_continuous_batching_trains_and_loses_nothing(
    tiny_config: TrainConfig, tmp_path: Path
) -> None:
    generator = msgspec.structs.replace(tiny_config.generator, continuous=True)
    # A request joins a running batch only in the place of a row that ended early (the
    # untrained model's stop byte, about 1 in 256 a step): 16 new bytes left a run with no
    # join in about one run of three, 64 in none of six.
    model = msgspec.structs.replace(tiny_config.model, max_new_tokens=64)
    config = msgspec.structs.replace(tiny_config, generator=generator, model=model)
    lines = await _run_losing_nothing(config, tmp_path / "run")
    # Requests joined running batches (the tiny run's episodes drift apart at once).
    assert max(line.get("generator.joins", 0) for line in lines) > 0


async def test_a_run_with_bf16_inference_trains_and_weighs_its_samples_near_one(
    tiny_config: TrainConfig, tmp_path: Path
) -> None:
    # The generator's copy and the KL reference in bf16; the learner's weights stay fp32 and
    # each published version is rounded as the generator loads it.
    model = msgspec.structs.replace(tiny_config.model, inference_dtype="bfloat16")
    learner = msgspec.structs.replace(tiny_config.learner, kl_coef=0.1)
    config = msgspec.structs.replace(tiny_config, model=model, learner=learner)
    lines = await _run_losing_nothing(config, tmp_path / "run")
    histograms = [line.get("learner.is_weight_mean") or {} for line in lines]
    weights = [h["mean"] for h in histograms if h.get("mean") is not None]
    assert weights
    # pi_prox / mu: the fp32 learner against the rounded sampler, a few versions stale at most
    assert all(0.8 < w < 1.25 for w in weights), weights
    assert all(abs(line.get("learner.kl_behaviour", 0.0)) < 0.2 for line in lines)


async def test_the_control_trains_for_the_rl_phases_wall_time_not_the_sft_step_count(
    tiny_config: TrainConfig, tmp_path: Path
) -> None:
    config = msgspec.structs.replace(tiny_config, control=True)
    out = tmp_path / "run"
    summary = await train(config, out)
    _check_rates(summary["heldout_pass_rate_sft_only_control"])
    progress = json.loads((out / "progress.json").read_text())
    rl_seconds = float(progress["rl"]["elapsed_s"])
    # The warm start stopped at its step budget; the control ran on to the RL phase's time.
    assert progress["sft"]["steps"] == config.sft.max_steps
    assert summary["control"]["steps"] > config.sft.max_steps
    assert summary["control"]["seconds"] >= rl_seconds


async def test_a_run_with_rehearsal_trains_on_the_demonstrations(
    tiny_config: TrainConfig, tmp_path: Path
) -> None:
    learner = msgspec.structs.replace(tiny_config.learner, demo_coef=1.0, demo_batch=4)
    config = msgspec.structs.replace(tiny_config, learner=learner)
    lines = await _run_losing_nothing(config, tmp_path / "run")
    # The term was computed on the SFT phase's demonstrations: a positive log-loss per token.
    assert max(line.get("learner.demo_loss", 0.0) for line in lines) > 0


async def test_rehearsal_without_demonstrations_stops_the_run_with_a_message(
    tiny_config: TrainConfig, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from roost.train.run import TrainError
    from roost.train.task_source import TaskSource

    # A task file whose demonstration levels hold no canonical solution: nothing to rehearse.
    monkeypatch.setattr(TaskSource, "demos", lambda self: [])
    sft = msgspec.structs.replace(tiny_config.sft, enabled=False)
    learner = msgspec.structs.replace(tiny_config.learner, demo_coef=1.0)
    config = msgspec.structs.replace(tiny_config, sft=sft, learner=learner)
    with pytest.raises(TrainError, match=r"learner\.demo_coef: rehearsal needs demonstrations"):
        await train(config, tmp_path / "run")
    assert not list((tmp_path / "run" / "checkpoints").glob("ckpt-*.pt"))


async def test_without_reused_verdicts_every_turn_is_run(
    tiny_config: TrainConfig, tmp_path: Path
) -> None:
    config = msgspec.structs.replace(
        tiny_config, episode=msgspec.structs.replace(tiny_config.episode, reuse_verdicts=False)
    )
    summary = await train(config, tmp_path / "run")
    assert summary["samples"] > 0
    assert summary["reused_verdicts"] == 0
