"""`TrainBook`: the staleness book of a training run, whose rollouts yield several samples.

`policies.staleness.StalenessBook` counts one sample per rollout: at k = 0 its admission rule
closes the gate once B rollouts of version u have started, so nothing starts while the learner
steps. A multi-turn episode yields one sample per turn, so the learner can step on B samples
while fewer than B rollouts have started and the gate is still open; a rollout starting then
would sample with version u and reach the learner at u + 1, past k = 0. So at k = 0 this book
also closes admission from the moment the learner may step until it has published (the
learner sets `version` after the generator acknowledged, or refused, the new weights). For
k >= 1 such a rollout is at most one version stale and the stepping rule covers it.
"""

from __future__ import annotations

from policies.staleness import StalenessBook

__all__ = ["TrainBook"]


class TrainBook(StalenessBook):
    def __init__(self, k: int, batch_size: int) -> None:
        self._stepping = False
        self._version = 0
        super().__init__(k, batch_size)

    @property
    def version(self) -> int:
        return self._version

    @version.setter
    def version(self, value: int) -> None:
        self._version = value
        self._stepping = False  # the learner sets the version once a step is published

    def may_step(self, learner_version: int) -> bool:
        allowed = super().may_step(learner_version)
        if allowed and self.k == 0:
            self._stepping = True  # the learner steps right after a yes
        return allowed

    def admits(self, in_flight: int) -> bool:
        return not self._stepping and super().admits(in_flight)
