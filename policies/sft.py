"""Supervised warm start: maximise log p(completion | prompt) on demonstration pairs.

Post-training is SFT then RL: the RL phase needs a policy that already succeeds sometimes, or
every GRPO group has equal rewards and carries no signal. `sft` is a plain function (a phase of
an experiment, or `roost sft`); it trains the policy in place and leaves its version alone.
"""

from __future__ import annotations

import dataclasses
import math
import random
import time
from collections.abc import Callable, Sequence

import torch

from policies.neural import NeuralPolicy
from policies.tokenizer import ByteTokenizer

__all__ = ["SFT_DECAYS", "SFTConfig", "SFTResult", "encode_pairs", "lr_at", "sft", "sft_loss"]

SFT_DECAYS = ("constant", "linear")


#: How far (a share of the budget) the elapsed time may lead the step count before the time
#: budget, rather than the steps, sets the decaying rate.
TIME_LEAD = 0.05


@dataclasses.dataclass(frozen=True)
class SFTConfig:
    steps: int = 200
    batch_size: int = 32
    lr: float = 1e-3
    weight_decay: float = 0.0
    max_grad_norm: float = 1.0
    #: Stop early after this many seconds (None: run every step).
    time_budget_s: float | None = None
    seed: int = 0
    #: "constant", or "linear": the rate falls to 0 over the steps, or over the time budget
    #: once its elapsed share leads theirs by more than TIME_LEAD (`lr_at`), so the last
    #: weights do not hinge on the last batches.
    decay: str = "constant"

    def __post_init__(self) -> None:
        """:raises ValueError: naming the field that is out of range."""
        if self.decay not in SFT_DECAYS:
            raise ValueError(f"unknown decay {self.decay!r}; choose one of {', '.join(SFT_DECAYS)}")
        if self.steps < 0:
            raise ValueError(f"steps: must be >= 0, got {self.steps}")
        # 0 failed only at the first step, as "token_logprobs needs at least one sequence".
        if self.batch_size < 1:
            raise ValueError(f"batch_size: must be >= 1, got {self.batch_size}")
        if not (math.isfinite(self.lr) and self.lr >= 0):
            raise ValueError(f"lr: must be finite and >= 0, got {self.lr}")
        if not (math.isfinite(self.weight_decay) and self.weight_decay >= 0):
            raise ValueError(f"weight_decay: must be finite and >= 0, got {self.weight_decay}")
        # At 0 clipping zeroes every gradient: training would silently do nothing.
        if math.isnan(self.max_grad_norm) or self.max_grad_norm <= 0:
            raise ValueError(f"max_grad_norm: must be > 0, got {self.max_grad_norm}")
        if self.time_budget_s is not None and not self.time_budget_s >= 0:
            raise ValueError(f"time_budget_s: must be >= 0 or None, got {self.time_budget_s}")


@dataclasses.dataclass(frozen=True)
class SFTResult:
    steps: int
    losses: list[float]
    seconds: float


def sft_loss(
    policy: NeuralPolicy, prompts: Sequence[Sequence[int]], completions: Sequence[Sequence[int]]
) -> torch.Tensor:
    """Mean negative log-likelihood per completion token."""
    logp, mask = policy.token_logprobs(prompts, completions)
    return -(logp * mask).sum() / mask.sum().clamp(min=1.0)


def encode_pairs(
    pairs: Sequence[tuple[str, str]], tokenizer: ByteTokenizer | None = None
) -> list[tuple[list[int], list[int]]]:
    """(prompt, completion) text pairs as the tokens SFT trains on: each completion is
    followed by EOS.

    :raises ValueError: a pair with an empty prompt.
    """
    tokenizer = tokenizer or ByteTokenizer()
    data = []
    for index, (prompt, completion) in enumerate(pairs):
        if not prompt:
            raise ValueError(f"pair {index}: empty prompt")
        data.append(
            (tokenizer.encode(prompt), [*tokenizer.encode(completion, bos=False), tokenizer.eos])
        )
    return data


def sft(
    policy: NeuralPolicy,
    pairs: Sequence[tuple[str, str]],
    config: SFTConfig | None = None,
    *,
    tokenizer: ByteTokenizer | None = None,
    on_step: Callable[[int, float], None] | None = None,
) -> SFTResult:
    """Train on (prompt, completion) text pairs; each completion is followed by EOS.

    Runs in the calling thread: from the event loop, call it via `anyio.to_thread.run_sync`.

    :raises ValueError: no pairs, or a pair with an empty prompt.
    """
    config = config or SFTConfig()
    if not pairs:
        raise ValueError("sft needs at least one (prompt, completion) pair")
    data = encode_pairs(pairs, tokenizer)
    rng = random.Random(config.seed)
    optimizer = torch.optim.AdamW(
        policy.parameters(), lr=config.lr, weight_decay=config.weight_decay
    )
    policy.train(True)
    losses: list[float] = []
    started = time.perf_counter()
    for step in range(config.steps):
        batch = [data[rng.randrange(len(data))] for _ in range(config.batch_size)]
        loss = sft_loss(policy, [p for p, _ in batch], [c for _, c in batch])
        optimizer.zero_grad(set_to_none=True)
        loss.backward()  # type: ignore[no-untyped-call]
        torch.nn.utils.clip_grad_norm_(list(policy.parameters()), config.max_grad_norm)
        lr = lr_at(config, step, time.perf_counter() - started)
        for group in optimizer.param_groups:
            group["lr"] = lr
        optimizer.step()
        losses.append(float(loss.detach()))
        if on_step is not None:
            on_step(step, losses[-1])
        if (
            config.time_budget_s is not None
            and time.perf_counter() - started > config.time_budget_s
        ):
            break
    policy.train(False)
    return SFTResult(steps=len(losses), losses=losses, seconds=time.perf_counter() - started)


def lr_at(config: SFTConfig, step: int, elapsed_s: float) -> float:
    """The learning rate of step `step` (from 0), `elapsed_s` seconds into the run."""
    if config.decay == "constant":
        return config.lr
    # A run with no steps, or no time, has nothing left to decay over (both divided by 0).
    if config.steps == 0 or config.time_budget_s == 0:
        return 0.0
    done = step / config.steps
    if config.time_budget_s is not None:
        # The time budget takes over only once it leads the step count by more than
        # TIME_LEAD (a slower machine), and still reaches 0 at its end. A run on pace for its
        # step budget then decays by steps alone, so the same seed gives the same weights:
        # slow early steps put its time share briefly ahead, and a rule that followed it
        # gave two runs of one seed different rates.
        elapsed = math.floor(100 * elapsed_s / config.time_budget_s) / 100
        done = max(done, (elapsed - TIME_LEAD) / (1 - TIME_LEAD))
    return config.lr * max(0.0, 1.0 - done)
