"""The learner's loss, top to bottom: GRPO advantages, the corrected clipped surrogate, KL.

Hyperparameters live in `LossConfig`; the maths is written out in `docs/learning.md`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import TypeVar

import torch

from policies.neural import NeuralPolicy
from policies.staleness import Correction

T = TypeVar("T")

__all__ = [
    "ADVANTAGE_SCALES",
    "LossConfig",
    "LossStats",
    "check_advantage_scale",
    "combine_stats",
    "combine_steps",
    "grpo_advantages",
    "grpo_loss",
    "micro_batches",
    "split_groups",
]


@dataclasses.dataclass(frozen=True)
class LossConfig:
    clip_eps: float = 0.2
    kl_coef: float = 0.0  # > 0 needs a reference policy
    temperature: float = 1.0
    # Scales negative advantages: 1 is plain GRPO; below 1 a failure pushes its tokens down
    # less than a success pulls its tokens up (see docs/learning.md for when that matters).
    negative_weight: float = 1.0


@dataclasses.dataclass(frozen=True)
class LossStats:
    loss: float
    clip_fraction: float
    is_weight_mean: float
    is_weight_max: float
    is_weight_min: float
    kl_behaviour: float
    kl_reference: float
    tokens: int


def combine_stats(parts: Sequence[LossStats]) -> LossStats:
    """The statistics of a batch from those of its micro-batches (token-weighted means; the
    loss and the KL term are already normalised by the whole batch's tokens, so they add)."""
    tokens = sum(p.tokens for p in parts)

    def mean(field: str) -> float:
        return sum(getattr(p, field) * p.tokens for p in parts) / tokens if tokens else 0.0

    return LossStats(
        loss=sum(p.loss for p in parts),
        clip_fraction=mean("clip_fraction"),
        is_weight_mean=mean("is_weight_mean") if tokens else 1.0,
        is_weight_max=max((p.is_weight_max for p in parts), default=1.0),
        is_weight_min=min((p.is_weight_min for p in parts), default=1.0),
        kl_behaviour=mean("kl_behaviour"),
        kl_reference=sum(p.kl_reference for p in parts),
        tokens=tokens,
    )


def combine_steps(steps: Sequence[LossStats]) -> LossStats:
    """The statistics of a version from those of its optimizer steps: each step's loss is
    normalised by its own tokens, so every figure is a token-weighted mean over the steps."""
    tokens = sum(p.tokens for p in steps)
    if len(steps) == 1 or not tokens:
        return combine_stats(steps)
    merged = combine_stats(steps)
    return dataclasses.replace(
        merged,
        loss=sum(p.loss * p.tokens for p in steps) / tokens,
        kl_reference=sum(p.kl_reference * p.tokens for p in steps) / tokens,
    )


def split_groups(groups: Sequence[Sequence[T]], parts: int) -> list[list[Sequence[T]]]:
    """`groups` in at most `parts` minibatches of whole groups with similar sample counts
    (largest group first, each to the lightest minibatch); none is empty, the order within a
    minibatch is the batch's."""
    bins: list[list[int]] = [[] for _ in range(min(parts, len(groups)))]
    weight = [0] * len(bins)
    for i in sorted(range(len(groups)), key=lambda i: (-len(groups[i]), i)):
        lightest = min(range(len(bins)), key=lambda b: (weight[b], b))
        bins[lightest].append(i)
        weight[lightest] += len(groups[i])
    return [[groups[i] for i in sorted(members)] for members in bins if members]


def micro_batches(lengths: Sequence[int], max_tokens: int) -> list[list[int]]:
    """Indices of `lengths` (prompt plus completion of each sample) in groups of similar
    length whose padded size (members times the longest) stays within `max_tokens`.

    A batch padded to its longest sample spends most of its compute on padding when short
    first attempts share it with long revision prompts; sorted groups nearly remove that, and
    bound the memory of one forward pass. A sample longer than `max_tokens` goes alone.
    """
    order = sorted(range(len(lengths)), key=lambda i: (lengths[i], i))
    groups: list[list[int]] = []
    current: list[int] = []
    for i in order:  # ascending, so lengths[i] is the longest of `current` once added
        if current and (len(current) + 1) * lengths[i] > max_tokens:
            groups.append(current)
            current = []
        current.append(i)
    if current:
        groups.append(current)
    return groups


#: How group-relative advantages are scaled: "std", GRPO's (r - mean) / std; "none",
#: r - mean (Liu et al., 2025, "Dr. GRPO"): dividing by the group's spread weights a
#: nearly-solved group's rare failure (and a nearly-failed group's rare pass) up to 2.6 times
#: a balanced group's samples at 8 rollouts.
ADVANTAGE_SCALES = ("std", "none")


def check_advantage_scale(name: str) -> None:
    if name not in ADVANTAGE_SCALES:
        raise ValueError(
            f"unknown advantage scale {name!r}; choose one of {', '.join(ADVANTAGE_SCALES)}"
        )


def grpo_advantages(rewards: Sequence[float], eps: float = 1e-6, scale: str = "std") -> list[float]:
    """Group-relative advantages: (r_i - mean(r)) / (std(r) + eps), population std, or
    r_i - mean(r) with `scale="none"`.

    A group whose rewards are all equal carries no signal: every advantage is 0.
    """
    check_advantage_scale(scale)
    n = len(rewards)
    if n == 0:
        return []
    mean = sum(rewards) / n
    std = (sum((r - mean) ** 2 for r in rewards) / n) ** 0.5
    if std < 1e-9:  # equal up to rounding: no signal, not a division of rounding errors
        return [0.0] * n
    divisor = std + eps if scale == "std" else 1.0
    return [(r - mean) / divisor for r in rewards]


def grpo_loss(
    policy: NeuralPolicy,
    prompts: Sequence[Sequence[int]],
    completions: Sequence[Sequence[int]],
    behaviour_logprobs: Sequence[Sequence[float]],
    advantages: Sequence[float],
    correction: Correction,
    config: LossConfig,
    reference: NeuralPolicy | None = None,
    *,
    normaliser: float | None = None,
    relabelled: Sequence[bool] | None = None,
    groups: Sequence[int] | None = None,
) -> tuple[torch.Tensor, LossStats]:
    """The loss to minimise for one batch (token-level mean over every completion token).

    `normaliser` replaces this batch's token count as the divisor: a micro-batch passes the
    whole batch's count, so that the gradients of its micro-batches add up to the batch's.
    A sample marked in `relabelled` has no behaviour log-probabilities for its prompt: the
    current ones stand in, so its importance weight is 1. `groups` labels each sample's GRPO
    group, whose prompts share their task's tokens (`NeuralPolicy.token_logprobs`).
    """
    dev = policy.device
    # 1. current log-probabilities (with gradient) and the padding mask
    logp, mask = policy.token_logprobs(
        prompts, completions, temperature=config.temperature, groups=groups
    )
    width = logp.shape[1]
    behaviour = torch.tensor(
        [list(b) + [0.0] * (width - len(b)) for b in behaviour_logprobs], device=dev
    )
    if relabelled is not None and any(relabelled):
        rows = torch.tensor(list(relabelled), device=dev).unsqueeze(1)
        behaviour = torch.where(rows, logp.detach(), behaviour)
    adv = torch.tensor(list(advantages), device=dev)
    adv = torch.where(adv < 0, adv * config.negative_weight, adv).unsqueeze(1).expand_as(logp)

    # 2. the proximal policy (the weights before this step), only for the decoupled objective.
    # Each sample is trained in exactly one optimizer step (a version's minibatches split its
    # groups) and the model has no dropout, so the weights before the step are the ones that
    # just computed `logp`: a second forward pass would repeat it. The ratio to the proximal
    # policy is then 1 and its clip never binds (`clip_fraction` reads 0); the correction acts
    # through the importance weight proximal / behaviour, capped (docs/learning.md).
    proximal = logp.detach() if correction.needs_proximal else None

    # 3. the clipped, importance-weighted surrogate, averaged over real tokens
    sur = correction.surrogate(logp, behaviour, proximal, adv)
    if normaliser is None:
        tokens = mask.sum().clamp(min=1.0)
    else:
        tokens = torch.tensor(float(normaliser), device=dev)
    pg_loss = -(sur.objective * mask).sum() / tokens

    # 4. optional KL to a frozen reference (k3 estimator: e^(ref-cur) - (ref-cur) - 1 >= 0),
    # importance-weighted like the policy term: the tokens were sampled by the behaviour policy,
    # not the current one. Unweighted, a stale token that the current policy has since pushed
    # far below the reference pulls back with force e^(ref-cur): one such token swamped whole
    # batches of the asynchronous runs (docs/learning.md). Weighted, that force is bounded by
    # pi_ref / mu. With fresh samples the weight is 1 and nothing changes.
    kl_ref = torch.zeros((), device=dev)
    if config.kl_coef > 0 and reference is not None:
        with torch.no_grad():
            ref, _ = reference.token_logprobs(
                prompts, completions, temperature=config.temperature, groups=groups
            )
        delta = ref - logp
        weight = sur.is_weight.clamp(max=correction.cap)  # pi_theta / mu, already computed
        kl_ref = (weight * (torch.exp(delta) - delta - 1) * mask).sum() / tokens
    loss = pg_loss + config.kl_coef * kl_ref

    # 5. diagnostics: KL(behaviour || current) by the k1 estimator on the sampled tokens
    with torch.no_grad():
        real = mask.bool()
        own = mask.sum().clamp(min=1.0)  # this micro-batch's tokens: its own means
        weights = sur.is_weight[real]
        stats = LossStats(
            loss=float(loss.detach()),
            clip_fraction=float(sur.clipped[real].float().mean()) if real.any() else 0.0,
            is_weight_mean=float(weights.mean()) if weights.numel() else 1.0,
            is_weight_max=float(weights.max()) if weights.numel() else 1.0,
            is_weight_min=float(weights.min()) if weights.numel() else 1.0,
            kl_behaviour=float(((behaviour - logp) * mask).sum() / own),
            kl_reference=float(kl_ref),
            tokens=int(mask.sum()),
        )
    return loss, stats
