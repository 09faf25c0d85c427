"""A simulated cluster of sandboxes: no processes, only seeded latencies and faults.

`SimCluster` is the world (per-runtime latencies, fault rates, daemon outage windows, one seeded
random generator); `ClusterSandbox` implements the `Sandbox` protocol against it. Run under the
virtual clock (`runtime.run(..., virtual_clock=True)`), thousands of them simulate hours of a
cluster in seconds, the same way every time for a given seed.

An exec runs a *simulated action*: the argv ``["sim-step", "<pass>"]`` exits 0 when ``<pass>`` is
``"pass"`` and 1 otherwise, after an exec latency drawn for the sandbox's runtime. Anything else
exits 127, as a shell does for an unknown command.
"""

from __future__ import annotations

import itertools
import random
from collections.abc import Mapping, Sequence
from types import TracebackType
from typing import Self

import anyio
import msgspec

from runtime.clock import now as clock_now
from runtime.distributions import Distribution
from sandboxes._errors import (
    DaemonError,
    SandboxBrokenError,
    SandboxClosedError,
    SandboxFileError,
    SandboxStartError,
)
from sandboxes._protocol import Command
from sandboxes._spec import ExecResult, SandboxSpec

__all__ = ["ClusterSandbox", "FaultModel", "Outage", "RuntimeProfile", "SimCluster"]


class RuntimeProfile(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """Latencies of one runtime, in simulated seconds."""

    cold_start: Distribution = Distribution.constant(1.0)
    exec: Distribution = Distribution.constant(0.05)
    reset: Distribution = Distribution.constant(0.01)


class Outage(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """A window of simulated time in which the daemon refuses every start and exec."""

    start: float
    end: float


class FaultModel(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """Rates are per call: a start fails, an exec finds its sandbox dead, or it hangs."""

    start_failure_rate: float = 0.0
    crash_rate: float = 0.0
    hang_rate: float = 0.0
    outages: list[Outage] = msgspec.field(default_factory=list)

    def __post_init__(self) -> None:
        for name in ("start_failure_rate", "crash_rate", "hang_rate"):
            rate = getattr(self, name)
            if not 0.0 <= rate <= 1.0:
                raise ValueError(f"{name} must be within [0, 1], got {rate}")


class SimCluster:
    """The simulated world shared by every `ClusterSandbox` of a run."""

    def __init__(
        self,
        runtimes: Mapping[str, RuntimeProfile],
        *,
        faults: FaultModel | None = None,
        seed: int = 0,
    ) -> None:
        self.runtimes = dict(runtimes)
        self.faults = faults or FaultModel()
        self.rng = random.Random(seed)
        self._ids = itertools.count()

    def in_outage(self) -> bool:
        now = clock_now()
        return any(o.start <= now < o.end for o in self.faults.outages)

    def profile(self, runtime: str) -> RuntimeProfile:
        try:
            return self.runtimes[runtime]
        except KeyError:
            raise SandboxStartError(f"no simulated runtime {runtime!r}") from None

    def sandbox(self, spec: SandboxSpec) -> ClusterSandbox:
        return ClusterSandbox(self, spec, f"sim-{next(self._ids)}")


class ClusterSandbox:
    """A `Sandbox` with simulated latencies and faults; see the module docstring."""

    def __init__(self, cluster: SimCluster, spec: SandboxSpec, sandbox_id: str) -> None:
        self._cluster = cluster
        self._spec = spec
        self._id = sandbox_id
        self._profile = cluster.profile(spec.runtime)
        self._files: dict[str, bytes] = {}
        self._started = False
        self._broken = False
        self._closed = False

    @property
    def id(self) -> str:
        return self._id

    @property
    def spec(self) -> SandboxSpec:
        return self._spec

    async def start(self) -> None:
        cluster = self._cluster
        await anyio.sleep(self._profile.cold_start.sample(cluster.rng))
        if cluster.in_outage():
            raise DaemonError(f"{self._id}: daemon unavailable (simulated outage)")
        if cluster.rng.random() < cluster.faults.start_failure_rate:
            raise SandboxStartError(f"{self._id}: start failed (simulated)")
        self._started = True

    async def exec(
        self,
        cmd: Command,
        *,
        stdin: bytes | None = None,
        timeout: float | None = None,
        env: Mapping[str, str] | None = None,
        cwd: str | None = None,
    ) -> ExecResult:
        self._check_usable()
        cluster = self._cluster
        limit = self._spec.timeout_s if timeout is None else timeout
        started = clock_now()
        if self._broken or cluster.in_outage():
            return ExecResult.infra(DaemonError(f"{self._id}: daemon unavailable (simulated)"))
        draw = cluster.rng.random()
        if draw < cluster.faults.crash_rate:
            self._broken = True
            return ExecResult.infra(SandboxBrokenError(f"{self._id}: sandbox died (simulated)"))
        if draw < cluster.faults.crash_rate + cluster.faults.hang_rate:
            # A hung sandbox answers nothing; the exec deadline is what ends the wait.
            self._broken = True
            await anyio.sleep(limit)
            return ExecResult.infra(
                SandboxBrokenError(f"{self._id}: no answer within {limit}s (simulated hang)"),
                duration_s=limit,
            )
        latency = self._profile.exec.sample(cluster.rng)
        if latency >= limit:
            await anyio.sleep(limit)
            return ExecResult(exit_code=None, timed_out=True, duration_s=limit)
        await anyio.sleep(latency)
        duration = clock_now() - started
        return ExecResult(exit_code=_simulated_exit(cmd), duration_s=duration)

    async def put_file(self, path: str, data: bytes, *, mode: int = 0o644) -> None:
        self._check_usable()
        self._files[path] = data

    async def get_file(self, path: str) -> bytes:
        self._check_usable()
        try:
            return self._files[path]
        except KeyError:
            raise SandboxFileError(f"{self._id}: no file {path!r}") from None

    async def reset(self) -> None:
        self._check_usable()
        if self._broken:
            raise SandboxBrokenError(f"{self._id}: cannot reset a dead sandbox")
        await anyio.sleep(self._profile.reset.sample(self._cluster.rng))
        self._files.clear()

    async def close(self) -> None:
        self._closed = True

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    def _check_usable(self) -> None:
        if self._closed or not self._started:
            raise SandboxClosedError(f"{self._id} is not running")


def _simulated_exit(cmd: Command) -> int:
    argv: Sequence[str] = cmd.split() if isinstance(cmd, str) else cmd
    if len(argv) == 2 and argv[0] == "sim-step":
        return 0 if argv[1] == "pass" else 1
    return 127
