"""Bounded staleness and off-policy correction: how stale a sample may be, and how it is weighted.

A sample whose oldest token was generated at version v may train at learner version u only if
u - v <= k. `StalenessBook` keeps the bound in three places:

- admission (AReaL-style): the scheduler starts a rollout only while every rollout started so
  far can still be trained within the next k versions, i.e. while
  ``usable_settled + ended_unsettled + in_flight < (u + k + 1) * batch_size``;
- stepping: the learner may move from version u to u + 1 only when no rollout still running
  began before version u + 1 - k (it waits for the straggler rather than orphaning it);
- consumption: the learner drops, and counts, any sample past the bound (a guard: stays zero).

k = 0 is synchronous on-policy training: one batch is admitted per version, and the next batch
is admitted only after the learner has published the new weights to the generator.

The correction turns behaviour log-probabilities into the clipped surrogate (see
`docs/learning.md` for the maths); `make_correction` picks one by name.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Sequence
from typing import Literal, Protocol, TypeVar

import torch

__all__ = [
    "CORRECTIONS",
    "Correction",
    "DecoupledPPO",
    "StalenessBook",
    "Surrogate",
    "TruncatedIS",
    "make_correction",
    "split_stale",
    "take_batch",
]


class StalenessBook:
    """Shared by the scheduler (as its `AdmissionGate`), the rollout workers and the learner.

    Every caller runs on the same event loop, so plain attributes need no lock.
    """

    def __init__(self, k: int, batch_size: int) -> None:
        if k < 0 or batch_size < 1:
            raise ValueError(f"need k >= 0 and batch_size >= 1, got k={k}, batch={batch_size}")
        self.k = k
        self.batch_size = batch_size
        #: The version the generator serves now (the learner sets it once the switch is done).
        self.version = 0
        self.usable = 0
        self._running: dict[str, int] = {}
        self._ended: set[str] = set()
        self._closed = False

    def close(self) -> None:
        """Admit nothing more (the run is draining); what is running may finish."""
        self._closed = True

    # -- admission (`actors.scheduler.AdmissionGate`) -------------------------------------------

    def admits(self, in_flight: int) -> bool:
        if self._closed:
            return False
        started = self.usable + len(self._ended) + in_flight
        return started < (self.version + self.k + 1) * self.batch_size

    # -- the rollout's life ----------------------------------------------------------------------

    def began(self, rollout_id: str) -> None:
        """The rollout asks for its first tokens: they will be of this version or newer."""
        self._running.setdefault(rollout_id, self.version)

    def ended(self, rollout_id: str) -> None:
        """The episode is over (called before the scheduler hears of it, so it counts as started
        until settled)."""
        self._ended.add(rollout_id)

    def settled(self, rollout_id: str, *, usable: bool) -> None:
        """The terminal record arrived: a usable sample now counts toward admission for good."""
        self._ended.discard(rollout_id)
        self._running.pop(rollout_id, None)
        if usable:
            self.usable += 1

    # -- the learner -----------------------------------------------------------------------------

    def may_step(self, learner_version: int) -> bool:
        """Whether a step to `learner_version + 1` leaves every running rollout within bound."""
        floor = learner_version + 1 - self.k
        return all(v >= floor for v in self._running.values())

    def resume_at(self, version: int) -> None:
        """The learner starts at `version` (a resumed run): count the batch each earlier version
        trained on as usable, so admission lets in k + 1 batches, as in a run that never
        stopped, rather than `version` batches at once."""
        self.version = version
        self.usable = max(self.usable, version * self.batch_size)

    def within(self, sample_version: int, learner_version: int) -> bool:
        return learner_version - sample_version <= self.k


class _Versioned(Protocol):
    @property
    def oldest_version(self) -> int: ...


S = TypeVar("S", bound=_Versioned)


def split_stale(
    groups: Sequence[Sequence[S]], learner_version: int, k: int
) -> tuple[list[list[S]], int]:
    """The groups with samples past the bound removed, and how many samples were removed."""
    kept: list[list[S]] = []
    dropped = 0
    for group in groups:
        fresh = [s for s in group if learner_version - s.oldest_version <= k]
        dropped += len(group) - len(fresh)
        if fresh:
            kept.append(fresh)
    return kept, dropped


def take_batch(
    groups: Sequence[Sequence[S]],
    learner_version: int,
    k: int,
    batch_size: int,
    *,
    size: Callable[[Sequence[S]], int] = len,
) -> tuple[list[list[S]], list[list[S]]]:
    """(batch, rest): the oldest groups until they hold `batch_size` units (`size` counts a
    group's: samples by default; the training run counts episodes, each of which yields one
    sample per model turn), plus every group that would be past the bound after this step (the
    batch may then be larger: a sample is trained late rather than dropped)."""
    ordered = sorted(groups, key=lambda g: min(s.oldest_version for s in g))
    floor = learner_version + 1 - k
    batch: list[list[S]] = []
    count = 0
    while ordered and (count < batch_size or min(s.oldest_version for s in ordered[0]) < floor):
        group = ordered.pop(0)
        batch.append(list(group))
        count += size(group)
    return batch, [list(g) for g in ordered]


# -- off-policy corrections ----------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Surrogate:
    """Per-token objective to maximise, and what the metrics report about it."""

    objective: torch.Tensor
    #: The importance weight pi_theta / mu of each token, without gradient (the decoupled
    #: objective caps it; the loss caps it again for its KL term).
    is_weight: torch.Tensor
    clipped: torch.Tensor


class Correction(Protocol):
    """Turns log-probabilities into a clipped, importance-weighted per-token objective.

    `proximal` is the policy before this update (no gradient); only the decoupled objective
    needs it, so `needs_proximal` says whether the learner must compute it.
    """

    @property
    def needs_proximal(self) -> bool: ...

    @property
    def cap(self) -> float:
        """The largest importance weight a token may get (the KL term uses it too)."""
        ...

    def surrogate(
        self,
        logp: torch.Tensor,
        behaviour: torch.Tensor,
        proximal: torch.Tensor | None,
        advantages: torch.Tensor,
    ) -> Surrogate: ...


@dataclasses.dataclass(frozen=True)
class TruncatedIS:
    """PPO-clip against the behaviour policy, with the ratio truncated at `cap`.

    r = pi_theta / pi_behaviour;  J = min(min(r, cap) * A, clip(r, 1 - eps, 1 + eps) * A).
    Truncation bounds the otherwise unbounded term for negative advantages and very stale
    tokens (the variance of plain importance sampling).
    """

    eps: float = 0.2
    cap: float = 2.0
    needs_proximal: bool = False

    def __post_init__(self) -> None:
        _check_clip("truncated_is", self.eps, self.cap)

    def surrogate(
        self,
        logp: torch.Tensor,
        behaviour: torch.Tensor,
        proximal: torch.Tensor | None,
        advantages: torch.Tensor,
    ) -> Surrogate:
        ratio = torch.exp(logp - behaviour)
        unclipped = torch.clamp(ratio, max=self.cap) * advantages
        clipped = torch.clamp(ratio, 1 - self.eps, 1 + self.eps) * advantages
        objective = torch.minimum(unclipped, clipped)
        return Surrogate(objective, ratio.detach(), (clipped < unclipped).detach())


@dataclasses.dataclass(frozen=True)
class DecoupledPPO:
    """AReaL's decoupled objective: clip against the proximal policy, reweight to behaviour.

    w = min(pi_prox / pi_behaviour, cap) (no gradient);  u = pi_theta / pi_prox;
    J = w * min(u * A, clip(u, 1 - eps, 1 + eps) * A).
    The trust region is centred on recent weights, not on whatever stale weights sampled.
    """

    eps: float = 0.2
    cap: float = 5.0
    needs_proximal: bool = True

    def __post_init__(self) -> None:
        _check_clip("decoupled", self.eps, self.cap)

    def surrogate(
        self,
        logp: torch.Tensor,
        behaviour: torch.Tensor,
        proximal: torch.Tensor | None,
        advantages: torch.Tensor,
    ) -> Surrogate:
        if proximal is None:
            raise ValueError("the decoupled objective needs the proximal log-probabilities")
        weight = torch.clamp(torch.exp(proximal - behaviour), max=self.cap).detach()
        ratio = torch.exp(logp - proximal)
        unclipped = ratio * advantages
        clipped = torch.clamp(ratio, 1 - self.eps, 1 + self.eps) * advantages
        objective = weight * torch.minimum(unclipped, clipped)
        return Surrogate(objective, weight, (clipped < unclipped).detach())


def _check_clip(name: str, eps: float, cap: float) -> None:
    """:raises ValueError: `eps` or `cap` that would make the objective silently wrong."""
    # A negative eps gives clamp(r, 1 + |eps|, 1 - |eps|), which torch answers with the
    # upper bound: every ratio, on-policy ones too, became 1 - |eps|.
    if not (math.isfinite(eps) and eps >= 0):
        raise ValueError(f"{name}: eps (the clip range) must be finite and >= 0, got {eps}")
    # Below 1 the cap would down-weight on-policy tokens (ratio 1); inf means no cap.
    if math.isnan(cap) or cap < 1:
        raise ValueError(f"{name}: cap (the largest importance weight) must be >= 1, got {cap}")


CorrectionName = Literal["truncated_is", "decoupled"]
CORRECTIONS: tuple[CorrectionName, ...] = ("truncated_is", "decoupled")


def make_correction(name: str, *, eps: float = 0.2, cap: float | None = None) -> Correction:
    """The correction called `name` ("truncated_is" or "decoupled").

    :raises ValueError: an unknown name, listing the known ones.
    """
    if name == "truncated_is":
        return TruncatedIS(eps=eps, cap=2.0 if cap is None else cap)
    if name == "decoupled":
        return DecoupledPPO(eps=eps, cap=5.0 if cap is None else cap)
    raise ValueError(f"unknown correction {name!r}; choose one of {', '.join(CORRECTIONS)}")
