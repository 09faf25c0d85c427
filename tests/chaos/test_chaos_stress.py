"""Chaos on a simulated cluster: every fault survived, every rollout accounted for."""

from __future__ import annotations

from pathlib import Path

import pytest

from roost.chaos import ChaosSpecError, parse_chaos
from roost.stress.simulate import simulate
from roost.stress.workload import load_workload

WORKLOAD = Path(__file__).parents[2] / "scripts" / "workloads" / "mixed.toml"
EVERY_FAULT = (
    "kill_sandbox=0.04,hung_exec=0.02,slow_exec=0.05,slow_exec_s=3,"
    "generator_error=0.03,crash.worker=0.02,seed=7"
)


def test_chaos_every_fault_kind_nothing_lost_nothing_counted_twice() -> None:
    chaos = parse_chaos(EVERY_FAULT, crashable=frozenset({"worker"}))
    result = simulate(
        load_workload(WORKLOAD), "fifo", rollouts=600, concurrency=40, seed=1, chaos=chaos
    )
    injected = result["chaos"]
    for kind in ("kill_sandbox", "hung_exec", "slow_exec", "generator_error", "crash.worker"):
        assert injected.get(kind, 0) > 0, f"no {kind} was injected: {injected}"
    assert result["lost"] == []
    assert result["counted_twice"] == []
    assert result["leases_outstanding"] == 0
    assert result["requested"] == 600
    assert result["completed"] + result["failed"] + result["cancelled"] == 600
    # Killed sandboxes are infrastructure failures, retried; crashed workers are found lost.
    assert result["retries"] > 0
    assert result["failures_by_reason"].get("lost", 0) == injected["crash.worker"]


def test_chaos_is_reproducible_for_a_seed() -> None:
    chaos = parse_chaos("kill_sandbox=0.05,generator_error=0.05,seed=3")
    runs = [
        simulate(load_workload(WORKLOAD), "fifo", rollouts=200, concurrency=20, seed=2, chaos=chaos)
        for _ in range(2)
    ]
    assert runs[0]["chaos"] == runs[1]["chaos"]
    assert runs[0]["completed"] == runs[1]["completed"]


@pytest.mark.parametrize(
    ("text", "complaint"),
    [
        ("kill_sandbox", "expected KIND=VALUE"),
        ("kill_sandbox=lots", "is not a number"),
        ("hung_exec=1.5", "must be in [0, 1]"),
        ("meteor=0.1", "unknown kind 'meteor'"),
        ("crash.scheduler=0.1", "cannot be crashed here"),
        ("kill_sandbox=0.6,hung_exec=0.6", "more than 1"),
        ("crash_first_by=0", "an integer >= 1"),
        ("crash_first_by=2.5", "an integer >= 1"),
        ("crash_first_by=inf", "not a finite number"),
        ("seed=nan", "not a finite number"),
    ],
)
def test_a_bad_chaos_spec_names_the_item_at_fault(text: str, complaint: str) -> None:
    with pytest.raises(ChaosSpecError) as info:
        parse_chaos(text, crashable=frozenset({"worker"}))
    assert complaint in str(info.value)
