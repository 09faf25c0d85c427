"""Faults of a training run's own parts: a verifier that raises, a generator that fails, and
the Docker daemon restarted under the run."""

from __future__ import annotations

import random

from actors.generator import GenerationError, GeneratorClient
from policies.neural import Sample
from roost.chaos.spec import ChaosSpec
from roost.chaos.wrappers import ChaosCounts, InjectedFault
from sandboxes._protocol import Sandbox
from tasks import Task, Verdict, Verifier

__all__ = ["ChaosGeneratorClient", "ChaosVerifier"]


class ChaosVerifier:
    """A `Verifier` that sometimes raises instead of judging (a bug or a broken harness):
    the episode must end as an evaluation failure, never hang or vanish."""

    def __init__(
        self, inner: Verifier, spec: ChaosSpec, rng: random.Random, counts: ChaosCounts
    ) -> None:
        self._inner = inner
        self._rate = spec.verifier_error
        self._rng = rng
        self._counts = counts

    async def verify(self, task: Task, text: str, sandbox: Sandbox) -> Verdict:
        if self._rng.random() < self._rate:
            self._counts.verifier_error += 1
            raise InjectedFault(f"injected verifier failure on {task.id}")
        return await self._inner.verify(task, text, sandbox)


class ChaosGeneratorClient(GeneratorClient):
    """A `GeneratorClient` whose requests sometimes fail as a crashed model server's would."""

    def __init__(
        self, inner: GeneratorClient, spec: ChaosSpec, rng: random.Random, counts: ChaosCounts
    ) -> None:
        super().__init__(inner.generator, timeout_s=inner.timeout_s)
        self._rate = spec.generator_error
        self._rng = rng
        self._counts = counts

    async def generate(self, prompt: list[int]) -> Sample:
        if self._rng.random() < self._rate:
            self._counts.generator_error += 1
            raise GenerationError("injected generator failure (chaos)")
        return await super().generate(prompt)
