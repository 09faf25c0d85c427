"""Chaos mode in a short training run: every fault kind is injected while RL runs, the run
keeps going to the end, and its books balance with nothing lost and nothing counted twice.

Process backend: sandbox processes killed from outside, hung and slow execs, generator and
verifier exceptions, and crashes of every kind of actor (generator, learner, collector,
scheduler, episode workers, recorder). Docker backend: containers removed under the run and the
Docker daemon restarted mid-run.
"""

from __future__ import annotations

import collections
import os
import shutil
from pathlib import Path
from typing import Any

import msgspec
import pytest

from roost.train.config import CRASHABLE_ROLES, TrainConfig, load_train_config
from roost.train.lineage import trace_lineage
from roost.train.records import TrajectoryRecord
from roost.train.rl import SURVIVE_CRASHES
from roost.train.run import train
from roost.train.rundir import RunDir
from roost.train.summary import load_run_records
from tests.train.conftest import IN_CI, TINY

pytestmark = pytest.mark.anyio

CRASHES = {
    "generator": 0.01,  # thousands of messages (a decoding step each)
    "scheduler": 0.02,
    "worker": 0.15,
    "collector": 0.15,  # one message per rollout: ~50 in this run
    "recorder": 0.15,
    "learner": 0.2,  # a few dozen messages
}
PROCESS_CHAOS = ",".join(
    [
        "kill_sandbox=0.05",
        "hung_exec=0.02",
        "slow_exec=0.05",
        "slow_exec_s=0.5",
        "generator_error=0.1",
        "verifier_error=0.03",
        "seed=3",
        *(f"crash.{role}={rate}" for role, rate in CRASHES.items()),
        "crash_first_by=20",  # every role crashes, whatever its share of the messages
    ]
)


def _assert_books_balance(out: Path, summary: dict[str, Any]) -> None:
    records, problems = load_run_records(RunDir(out))
    assert problems == []
    lineage = trace_lineage(records)
    terminal = [r.rollout_id for r in records if isinstance(r, TrajectoryRecord)]
    assert len(terminal) == len(set(terminal)), "a rollout recorded twice"
    assert lineage.requested is not None
    assert set(terminal) == set(lineage.requested), "a requested rollout has no record"
    trained = [rid for step in lineage.steps for rid in step.rollout_ids]
    assert len(trained) == len(set(trained)), "a rollout trained on twice"
    assert summary["balanced"] is True
    assert summary["requested"] == summary["scored"] + summary["failed"] + summary["cancelled"]
    assert summary["trained_twice"] == 0
    assert summary["scored"] > 0
    versions = [s.version for s in lineage.steps]
    assert versions == list(range(1, versions[-1] + 1))


async def test_chaos_train_survives_every_fault_kind_on_the_process_backend(
    tiny_config: TrainConfig, tmp_path: Path
) -> None:
    config = msgspec.structs.replace(
        tiny_config,
        chaos=PROCESS_CHAOS,
        rl=msgspec.structs.replace(tiny_config.rl, max_versions=6, time_budget_s=100),
    )
    out = tmp_path / "run"
    summary = await train(config, out)

    _assert_books_balance(out, summary)
    assert summary["heldout_pass_rate_after_rl"] is not None  # the run went on to the end
    chaos = summary["chaos"]
    for kind in ("kill_sandbox", "hung_exec", "slow_exec", "generator_error", "verifier_error"):
        assert chaos["faults"][kind] > 0, f"{kind} was never injected: the test proves nothing"
    assert set(chaos["crashes"]) == CRASHABLE_ROLES
    assert all(n > 0 for n in chaos["crashes"].values())
    # Each crash restarted its actor with its state and handed it its message again, unless
    # that message had crashed it `redeliver` times in a row already: then it went to the dead
    # letters as "crashed" (six injected crashes in a row happen in a few runs in a hundred).
    crashes = sum(chaos["crashes"].values())
    assert chaos["restarts"] == crashes
    assert chaos["redelivered"] + chaos["crashed_dead_letters"] == crashes
    assert chaos["crashed_dead_letters"] * (SURVIVE_CRASHES["redeliver"] + 1) <= crashes
    # Failures are recorded with their reason, never silently dropped.
    records, _ = load_run_records(RunDir(out))
    reasons = collections.Counter(
        r.reason.split(":")[0] for r in records if isinstance(r, TrajectoryRecord) and r.reason
    )
    assert sum(reasons.values()) >= summary["failed"]


def _docker_ready() -> bool:
    return shutil.which("dockerd") is not None and os.geteuid() == 0


async def test_chaos_train_survives_removed_containers_and_a_daemon_restart(
    tmp_path: Path,
) -> None:
    if not _docker_ready():
        if IN_CI:
            pytest.fail("the docker chaos test needs root and dockerd in CI")
        pytest.skip("needs root and dockerd")
    path = tmp_path / "tiny-docker.toml"
    path.write_text(TINY.replace("[sandbox]\n", '[sandbox]\nbackend = "docker"\n'))
    config = load_train_config(
        path,
        [
            "rl.max_versions=5",
            "rl.time_budget_s=150",
            'chaos="remove_container=0.05,kill_sandbox=0.03,restart_docker=4,seed=5"',
        ],
    )
    out = tmp_path / "run"
    summary = await train(config, out)

    _assert_books_balance(out, summary)
    assert summary["heldout_pass_rate_after_rl"] is not None
    faults = summary["chaos"]["faults"]
    assert faults["restart_docker"] == 1
    assert faults["restart_docker_failed"] == 0
    assert faults["remove_container"] > 0
