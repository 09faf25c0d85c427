"""A simulated generator for stress runs: latency from a distribution, outcome from the request.

It stands in for the model behind the `ActionSource` seam: each call waits a drawn latency (on
the virtual clock in simulations), then returns a simulated action that passes at the
request's `sim_pass_step` (see `sandboxes.sim_cluster`).
"""

from __future__ import annotations

import random

import anyio

from actors.rollouts import RolloutRequest
from actors.sandbox_worker import Action
from runtime.distributions import Distribution
from sandboxes._spec import ExecResult

__all__ = ["SimulatedGenerator"]


class SimulatedGenerator:
    """An `ActionSource` with seeded latencies; shared by every worker of a run."""

    def __init__(self, latency: Distribution, *, seed: int = 0) -> None:
        self.latency = latency
        self.rng = random.Random(seed)
        self.calls = 0

    async def act(self, request: RolloutRequest, step: int, last: ExecResult | None) -> Action:
        self.calls += 1
        await anyio.sleep(self.latency.sample(self.rng))
        passes = request.sim_pass_step is not None and step + 1 >= request.sim_pass_step
        return Action(["sim-step", "pass" if passes else "fail"])
