"""`TrainBook`: the staleness book of a training run, whose rollouts yield several samples.

At k = 0 a rollout that starts while the learner steps from u to u + 1 samples with version
u and reaches the learner at u + 1, past the bound. The plain `StalenessBook` already keeps
that from happening: the learner steps only once it holds B episodes (its batch counts
episodes, as admission does), and every held episode counts as started until the collector
settles it, so started >= (u + 1) * B and the gate is shut. The discrete-event model in
tests/learning/test_staleness.py checks this with multi-turn episodes and groups without
signal. This book was written while the batch counted samples (model turns), when the
learner could step on B samples from fewer than B episodes with the gate open.

This book keeps a second, independent closing at k = 0: from the moment the learner may
step until its step has ended, nothing is admitted. It costs nothing (at k = 0 nothing would
be admitted then anyway) and does not rest on the collector's order of settling. For k >= 1 a
rollout starting then is at most one version stale and the stepping rule covers it.

Setting `version` ends the closing, so the learner sets it however the step ends (in a
`finally`: published, refused, given up, or failed with its batch put back); before, a
failed step left admission shut at k = 0 for the rest of the run.
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
        self._stepping = False  # the learner sets the version whenever a step ends

    def may_step(self, learner_version: int) -> bool:
        allowed = super().may_step(learner_version)
        if allowed and self.k == 0:
            self._stepping = True  # the learner steps right after a yes
        return allowed

    def admits(self, in_flight: int) -> bool:
        return not self._stepping and super().admits(in_flight)
