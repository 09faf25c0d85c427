"""Which level the next RL task comes from: the curriculum's band, or uniform.

With `tasks.curriculum = "band"` the draw follows `policies.curriculum.Curriculum`, fed with
every scored rollout, so the training mix stays where groups disagree (some pass, some fail:
a learning signal), mixed with a uniform `tasks.explore` share so that no level is ever
abandoned: a test-only level nobody passes yet is still tried, and the first passes there
pull it into the mix.
"""

from __future__ import annotations

import json
import random
from typing import Any

from policies.curriculum import Curriculum, CurriculumConfig
from roost.train.config import TasksConfig

__all__ = ["LevelChooser"]


class LevelChooser:
    def __init__(
        self, config: TasksConfig, levels: list[int], *, seed: int, state: dict[str, Any] | None
    ) -> None:
        self.levels = sorted(levels)
        self.mode = config.curriculum
        self.explore = config.explore
        self._rng = random.Random(seed)
        curriculum_config = CurriculumConfig(
            levels=max(self.levels), band=(config.band[0], config.band[1]), explore=0.0
        )
        if state:
            self.curriculum = Curriculum.from_bytes(
                json.dumps(state).encode(), curriculum_config, seed=seed
            )
        else:
            self.curriculum = Curriculum(curriculum_config, seed=seed)

    def weights(self) -> dict[int, float]:
        """The probability of each level in the next draw."""
        uniform = 1.0 / len(self.levels)
        if self.mode == "uniform":
            return dict.fromkeys(self.levels, uniform)
        band = self.curriculum.weights()
        masked = {level: band.get(level, 0.0) for level in self.levels}
        total = sum(masked.values())
        if total <= 0:
            return dict.fromkeys(self.levels, uniform)
        return {
            level: (1 - self.explore) * w / total + self.explore * uniform
            for level, w in masked.items()
        }

    def draw(self) -> int:
        weights = self.weights()
        return self._rng.choices(list(weights), weights=list(weights.values()))[0]

    def scored(self, task_id: str, level: int, passed: bool) -> None:
        self.curriculum.record(task_id, level, passed)

    def state(self) -> dict[str, Any]:
        """What a checkpoint keeps (JSON): the curriculum's decayed pass counts."""
        return json.loads(self.curriculum.to_bytes())  # type: ignore[no-any-return]
