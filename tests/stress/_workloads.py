"""Workloads built in code for the scheduling tests."""

from __future__ import annotations

from typing import Any

from roost.stress.workload import ClusterSpec, GroupSpec, SchedulerSpec, Workload
from runtime.distributions import Distribution
from sandboxes.sim_cluster import FaultModel, RuntimeProfile

FAST = RuntimeProfile(
    cold_start=Distribution.constant(2.0),
    exec=Distribution(dist="exponential", mean=0.3),
    reset=Distribution.constant(0.01),
)


def workload(
    *,
    groups: list[GroupSpec] | None = None,
    faults: FaultModel | None = None,
    capacity: int = 32,
    runtimes: tuple[str, ...] = ("python",),
    prewarm: dict[str, int] | None = None,
    scheduler: SchedulerSpec | None = None,
    deadline_s: float = 3600.0,
    max_steps: int = 5,
    **profile: Any,
) -> Workload:
    profiles = {rt: RuntimeProfile(**profile) if profile else FAST for rt in runtimes}
    return Workload(
        name="test",
        max_steps=max_steps,
        deadline_s=deadline_s,
        groups=groups or [GroupSpec(name="g", steps_to_pass=Distribution.constant(2.0))],
        cluster=ClusterSpec(
            nodes=1, slots_per_node=capacity, runtimes=profiles, prewarm=prewarm or {}
        ),
        faults=faults or FaultModel(),
        scheduler=scheduler or SchedulerSpec(),
    )
