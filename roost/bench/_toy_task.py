"""A tiny synthetic task for the learning benchmarks: reverse a short string.

The prompt is ``rev:<s>=``; the completion should be ``s`` reversed, then EOS. The reward is
1.0 for an exact answer and otherwise the fraction of leading characters right, so an untrained
model gets a graded signal. Independent of `tasks/` on purpose (benchmarks of the learning
machinery should not move when the task suite changes).
"""

from __future__ import annotations

import random

from actors.rollouts import RolloutRequest
from actors.sandbox_worker import Action
from sandboxes._spec import ExecResult

__all__ = ["ToyTasks"]

ALPHABET = "abcd"


class ToyTasks:
    """Seeded task strings, looked up by task id ``t<n>``."""

    def __init__(self, *, seed: int = 0, min_len: int = 2, max_len: int = 4) -> None:
        self.seed = seed
        self.min_len = min_len
        self.max_len = max_len

    def text(self, task_id: str) -> str:
        rng = random.Random(f"{self.seed}:{task_id}")
        return "".join(rng.choice(ALPHABET) for _ in range(rng.randint(self.min_len, self.max_len)))

    def prompt(self, task_id: str) -> str:
        return f"rev:{self.text(task_id)}="

    def answer(self, task_id: str) -> str:
        return self.text(task_id)[::-1]

    def reward(self, task_id: str, completion: str) -> float:
        answer = self.answer(task_id)
        if completion == answer:
            return 1.0
        right = 0
        for got, want in zip(completion, answer, strict=False):
            if got != want:
                break
            right += 1
        return 0.5 * right / len(answer)

    # -- the `ModelActionSource` callbacks (one turn per episode) --------------------------------

    def prompt_for(self, request: RolloutRequest, step: int, last: ExecResult | None) -> str:
        return self.prompt(request.task_id)

    def action_for(self, request: RolloutRequest, text: str) -> Action:
        passed = text == self.answer(request.task_id)
        return Action(["sim-step", "pass" if passed else "fail"])
