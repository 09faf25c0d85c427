"""Self-imitation: replay the learner's own better-than-baseline samples with a likelihood loss.

GRPO trains on each sample once, at a step size small enough to keep on-policy updates
stable, so a success on a task the policy rarely solves moves it only a little and is gone.
Self-imitation learning (Oh et al., 2018) keeps the samples whose return beat the baseline
in a replay buffer and, at every step, adds a log-likelihood term on a draw from it,
weighted by how far each beat its baseline. Here the baseline is the GRPO group's mean, so
the weight is the sample's positive advantage: a group's one success among failures weighs
most, a group that mostly passes little, and a group with equal rewards not at all.

The replayed samples are off-policy by design (the term is imitation, not a policy
gradient), so they carry no importance weight; the buffer's bound keeps them recent.
"""

from __future__ import annotations

import dataclasses
import random
from collections import deque
from collections.abc import Sequence

import torch

from policies.neural import NeuralPolicy

__all__ = ["ImitationBuffer", "Kept", "imitation_loss"]


@dataclasses.dataclass(frozen=True)
class Kept:
    """One remembered sample: the prompt, the completion and its weight (its advantage)."""

    prompt: tuple[int, ...]
    completion: tuple[int, ...]
    weight: float


class ImitationBuffer:
    """The most recent `capacity` samples with a positive advantage (oldest dropped first)."""

    def __init__(self, capacity: int, rng: random.Random) -> None:
        if capacity < 1:
            raise ValueError(f"capacity must be >= 1, got {capacity}")
        self.rng = rng
        self.kept: deque[Kept] = deque(maxlen=capacity)

    def __len__(self) -> int:
        return len(self.kept)

    def add(
        self,
        prompts: Sequence[Sequence[int]],
        completions: Sequence[Sequence[int]],
        advantages: Sequence[float],
    ) -> int:
        """Keep each sample whose advantage is positive and whose completion is not empty;
        returns how many were kept."""
        added = 0
        for prompt, completion, advantage in zip(prompts, completions, advantages, strict=True):
            if advantage > 0 and completion:
                self.kept.append(Kept(tuple(prompt), tuple(completion), float(advantage)))
                added += 1
        return added

    def draw(self, n: int) -> list[Kept]:
        """Up to `n` distinct kept samples, uniformly at random."""
        return self.rng.sample(list(self.kept), min(n, len(self.kept)))

    def state(self) -> list[tuple[list[int], list[int], float]]:
        """Plain lists (a checkpoint stores them without pickling code)."""
        return [(list(k.prompt), list(k.completion), k.weight) for k in self.kept]

    def restore(self, state: Sequence[tuple[Sequence[int], Sequence[int], float]]) -> None:
        self.kept.clear()
        for prompt, completion, weight in state:
            self.kept.append(Kept(tuple(prompt), tuple(completion), float(weight)))


def imitation_loss(
    policy: NeuralPolicy,
    kept: Sequence[Kept],
    *,
    normaliser: float,
    temperature: float = 1.0,
) -> torch.Tensor:
    """Weighted negative log-likelihood of `kept`'s completions, summed over tokens and
    divided by `normaliser` (the whole draw's tokens, so micro-batches add up)."""
    logp, mask = policy.token_logprobs(
        [k.prompt for k in kept], [k.completion for k in kept], temperature=temperature
    )
    weights = torch.tensor([k.weight for k in kept], device=logp.device).unsqueeze(1)
    return -(weights * logp * mask).sum() / max(normaliser, 1.0)
