"""The neural policy interface: what the generator and the learner need from a model.

A model plugs into roost by implementing `NeuralPolicy`. Generation is split into `start` (the
prompt pass) and `advance` (a few decoding steps) so that the generator can switch weights
between two calls: a sequence already in flight carries on with the new weights, and each token
records the parameter version that sampled it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Mapping, Sequence
from typing import Protocol, runtime_checkable

import torch

__all__ = ["Decoding", "JoiningPolicy", "NeuralPolicy", "Sample", "generate", "use_threads"]

#: torch's intra-op thread count as the process started (on a CPU: one per core).
DEFAULT_THREADS = torch.get_num_threads()


def use_threads(threads: int) -> None:
    """Run this thread's model compute on `threads` intra-op threads (0: `DEFAULT_THREADS`).

    OpenMP keeps the count per calling thread, and worker threads are reused from phase to
    phase, so every model call sets its own. Two models computing at once (the RL phase's
    generator and learner) on a CPU each want a share of the cores: each at the default
    runs twice as many spinning OpenMP threads as there are cores (docs/benchmarks.md).

    :raises ValueError: a negative `threads`.
    """
    if threads < 0:  # torch's own refusal does not say whose count it was
        raise ValueError(f"threads: must be >= 0 (0: torch's default), got {threads}")
    # Only when it reads otherwise: setting even the same count explicitly changed the SFT
    # warm start's weights here (a run of cef89da: 62.2 / 61.8 % held-out after SFT against
    # the 67.8 / 62.5 % of every run before), so a fresh thread keeps torch's own setting.
    wanted = threads or DEFAULT_THREADS
    if torch.get_num_threads() != wanted:
        torch.set_num_threads(wanted)


@dataclasses.dataclass(frozen=True, slots=True)
class Sample:
    """One completion: its tokens, the behaviour log-probability and version of each."""

    tokens: list[int]
    logprobs: list[float]
    versions: list[int]

    @property
    def oldest_version(self) -> int:
        """The version of the oldest token (the sample's staleness is counted from it)."""
        return min(self.versions) if self.versions else -1


class Decoding(Protocol):
    """A batch being decoded: opaque state owned by the policy that started it."""

    @property
    def done(self) -> bool: ...

    @property
    def size(self) -> int: ...

    def samples(self, rows: Sequence[int] | None = None) -> list[Sample]:
        """The completions of `rows` (default: every row), as far as they have got."""
        ...

    def ended(self) -> list[int]:
        """The rows that have finished (sampled end-of-text or reached the token limit)."""
        ...


class NeuralPolicy(Protocol):
    """A model that samples completions with log-probabilities and can be trained.

    Thread safety: the caller serializes calls (the generator runs one batch at a time in a
    worker thread; the learner owns its own copy).
    """

    @property
    def version(self) -> int:
        """The parameter version; the learner sets it after each optimizer step."""
        ...

    @version.setter
    def version(self, value: int) -> None: ...

    @property
    def device(self) -> torch.device: ...

    def start(
        self,
        prompts: Sequence[Sequence[int]],
        *,
        max_new_tokens: int,
        temperature: float = 1.0,
        seed: int | None = None,
    ) -> Decoding:
        """Run the prompts (batched) and sample the first token of each completion."""
        ...

    def advance(self, decoding: Decoding, steps: int) -> int:
        """Decode up to `steps` more tokens for every unfinished sequence; returns tokens made."""
        ...

    def token_logprobs(
        self,
        prompts: Sequence[Sequence[int]],
        completions: Sequence[Sequence[int]],
        *,
        temperature: float = 1.0,
        groups: Sequence[int] | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Log-probabilities of `completions` given `prompts`, differentiable.

        Returns (logprobs, mask), both [batch, longest completion]; mask is 1.0 on real tokens.
        `groups` labels prompts that begin alike (a GRPO group's: its task's prompt), so that
        a policy may compute what they share once; the result is the same function.
        """
        ...

    def parameters(self) -> Iterator[torch.nn.Parameter]: ...

    def train(self, mode: bool = True) -> object: ...

    def state_dict(self) -> dict[str, torch.Tensor]:
        """A copy of the weights (the learner keeps it to undo a failed update)."""
        ...

    def load_state_dict(self, state: Mapping[str, torch.Tensor], version: int) -> None:
        """Replace the weights; later tokens are tagged with `version`."""
        ...


@runtime_checkable
class JoiningPolicy(Protocol):
    """A policy whose running batch can take new prompts between two `advance` calls
    (continuous batching): the generator then need not wait for a batch's longest sequence."""

    def join(
        self,
        decoding: Decoding,
        keep: Sequence[int],
        prompts: Sequence[Sequence[int]],
        *,
        seed: int | None = None,
    ) -> Decoding:
        """A decoding of rows `keep` of `decoding` (in that order, each carrying on where it
        was), then one new row per prompt (its prompt run and first token sampled). Every
        other row is dropped. After a join that returns, use only the new decoding; a join
        that raises must leave `decoding` as it was (the generator carries on with it)."""
        ...


def generate(
    policy: NeuralPolicy,
    prompts: Sequence[Sequence[int]],
    *,
    max_new_tokens: int,
    temperature: float = 1.0,
    seed: int | None = None,
) -> list[Sample]:
    """Offline batched generation: start, then advance until every sequence is finished."""
    decoding = policy.start(
        prompts, max_new_tokens=max_new_tokens, temperature=temperature, seed=seed
    )
    while not decoding.done:
        policy.advance(decoding, max_new_tokens)
    return decoding.samples()
