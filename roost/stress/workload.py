"""The workload file: task groups, the simulated cluster, faults and scheduler settings (TOML).

Every table is validated; an error names the key path that is wrong and what was expected, for
example ``groups[1].steps_to_pass: lognormal needs 'sigma'``.
"""

from __future__ import annotations

import math
import tomllib
from pathlib import Path

import msgspec

from policies.scheduling import make_policy
from runtime.distributions import Distribution
from sandboxes.sim_cluster import FaultModel, RuntimeProfile

__all__ = ["Workload", "WorkloadError", "load_workload"]


class WorkloadError(ValueError):
    """A workload file that cannot be used; the message names the file and the key path."""


class GroupSpec(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """A family of tasks: its runtime, who owns it, and how its episodes behave."""

    name: str
    runtime: str = "python"
    tenant: str = "default"
    priority: int = 0
    #: Weight for fair share.
    weight: float = 1.0
    #: Relative share of the requests that belong to this group.
    share: float = 1.0
    #: The step at which the episode's action passes (rounded up; beyond max_steps: never).
    steps_to_pass: Distribution = Distribution.constant(1.0)
    max_steps: int | None = None
    deadline_s: float | None = None

    def __post_init__(self) -> None:
        if not self.name:
            raise ValueError("name must not be empty")
        # Written so that NaN fails too (every comparison with it is false).
        if not (0 < self.weight < math.inf and 0 <= self.share < math.inf):
            raise ValueError(
                f"weight must be finite and > 0 and share finite and >= 0, "
                f"got weight {self.weight}, share {self.share}"
            )
        _check_episode(self.max_steps, self.deadline_s)


class ClusterSpec(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    nodes: int = 1
    slots_per_node: int = 64
    runtimes: dict[str, RuntimeProfile] = msgspec.field(
        default_factory=lambda: {"python": RuntimeProfile()}
    )
    #: Sandboxes started and left idle before the first request, per runtime.
    prewarm: dict[str, int] = msgspec.field(default_factory=dict)
    #: Most sandboxes of one runtime alive at once (absent: up to the capacity).
    max_per_runtime: dict[str, int] = msgspec.field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.nodes < 1 or self.slots_per_node < 1:
            raise ValueError("nodes and slots_per_node must be >= 1")
        if sum(self.prewarm.values()) > self.capacity:
            raise ValueError(f"prewarm asks for more sandboxes than capacity {self.capacity}")
        for runtime, count in self.prewarm.items():
            if count > self.max_per_runtime.get(runtime, self.capacity):
                raise ValueError(f"prewarm: {runtime} asks for more than max_per_runtime allows")

    @property
    def capacity(self) -> int:
        return self.nodes * self.slots_per_node


class GeneratorSpec(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    latency: Distribution = Distribution.constant(0.5)


class QuotaSpec(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    group: dict[str, int] = msgspec.field(default_factory=dict)
    runtime: dict[str, int] = msgspec.field(default_factory=dict)
    tenant: dict[str, int] = msgspec.field(default_factory=dict)


class SchedulerSpec(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    max_retries: int = 3
    backoff_s: float = 1.0
    backoff_max_s: float = 60.0
    lost_after_s: float = 60.0
    sweep_interval_s: float = 10.0
    quotas: QuotaSpec = msgspec.field(default_factory=QuotaSpec)
    #: Options per policy name, e.g. {priority = {aging_per_s = 0.05}}.
    policy_options: dict[str, dict[str, float]] = msgspec.field(default_factory=dict)

    def __post_init__(self) -> None:
        # Checked when the file is read, not mid-simulation, where a sweep every 0 s or bad
        # policy options surfaced as a traceback out of the actor system.
        if self.max_retries < 0:
            raise ValueError(f"max_retries: must be >= 0, got {self.max_retries}")
        if not (0 <= self.backoff_s <= self.backoff_max_s < math.inf):
            raise ValueError(
                f"backoff_s, backoff_max_s: need 0 <= backoff_s <= backoff_max_s, finite, "
                f"got {self.backoff_s}, {self.backoff_max_s}"
            )
        if not 0 <= self.lost_after_s < math.inf:
            raise ValueError(f"lost_after_s: must be finite and >= 0, got {self.lost_after_s}")
        if not 0 < self.sweep_interval_s < math.inf:
            raise ValueError(
                f"sweep_interval_s: must be finite and > 0, got {self.sweep_interval_s}"
            )
        for table in ("group", "runtime", "tenant"):
            for name, limit in getattr(self.quotas, table).items():
                if limit < 1:  # 0 never starts a rollout of it: each waits out its deadline
                    raise ValueError(f"quotas.{table}.{name}: must be >= 1, got {limit}")
        for policy, options in self.policy_options.items():
            make_policy(policy, options)  # raises ValueError naming the policy and the option


class Workload(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    name: str
    description: str = ""
    max_steps: int = 10
    deadline_s: float = 600.0
    #: Time between requests; absent, every request arrives at time zero.
    arrivals: Distribution | None = None
    groups: list[GroupSpec] = msgspec.field(default_factory=lambda: [GroupSpec(name="default")])
    cluster: ClusterSpec = msgspec.field(default_factory=ClusterSpec)
    generator: GeneratorSpec = msgspec.field(default_factory=GeneratorSpec)
    faults: FaultModel = msgspec.field(default_factory=FaultModel)
    scheduler: SchedulerSpec = msgspec.field(default_factory=SchedulerSpec)

    def __post_init__(self) -> None:
        _check_episode(self.max_steps, self.deadline_s)
        if not self.groups:
            raise ValueError("groups: at least one group is needed")
        names = [g.name for g in self.groups]
        if len(set(names)) != len(names):
            raise ValueError(f"groups: names must be unique, got {names}")
        for group in self.groups:
            if group.runtime not in self.cluster.runtimes:
                raise ValueError(
                    f"groups: {group.name!r} needs runtime {group.runtime!r}, which "
                    f"cluster.runtimes does not define"
                )
        if sum(g.share for g in self.groups) <= 0:
            raise ValueError("groups: the shares must not all be zero")


def _check_episode(max_steps: int | None, deadline_s: float | None) -> None:
    """What each rollout request needs (its constructor refused these mid-simulation)."""
    if max_steps is not None and max_steps < 1:
        raise ValueError(f"max_steps: must be >= 1, got {max_steps}")
    if deadline_s is not None and not 0 < deadline_s < math.inf:
        raise ValueError(f"deadline_s: must be finite and > 0, got {deadline_s}")


def load_workload(path: str | Path) -> Workload:
    """Read and validate a workload file.

    :raises WorkloadError: unreadable file, bad TOML (with line and column), or a bad value
        (with its key path).
    """
    path = Path(path)
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise WorkloadError(f"{path}: cannot read: {exc.strerror}") from None
    except UnicodeDecodeError as exc:
        raise WorkloadError(f"{path}: not UTF-8 text (byte {exc.start})") from None
    except tomllib.TOMLDecodeError as exc:
        raise WorkloadError(f"{path}: not valid TOML: {exc}") from None
    except RecursionError:  # tomllib recurses once per level of `[[[...` or `{a={a=...`
        raise WorkloadError(f"{path}: not valid TOML: nested too deeply") from None
    except ValueError as exc:  # a NUL byte in the path
        raise WorkloadError(f"{path!r}: cannot read: {exc}") from None
    try:
        return msgspec.convert(data, Workload)
    except msgspec.ValidationError as exc:
        raise WorkloadError(f"{path}: {exc}") from None
