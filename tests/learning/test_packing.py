"""Packed log-probabilities: several sequences per row, each seeing only itself."""

from __future__ import annotations

import itertools
import random

import pytest
import torch

from policies.transformer import TransformerConfig, TransformerPolicy, pack_rows


def _policy() -> TransformerPolicy:
    config = TransformerConfig(d_model=32, n_layers=2, n_heads=2, max_len=128)
    return TransformerPolicy(config, device="cpu", seed=5)


def _grads(policy: TransformerPolicy) -> list[torch.Tensor]:
    return [p.grad.clone() for p in policy.parameters() if p.grad is not None]


@pytest.mark.parametrize("seed", [0, 1])
def test_a_packed_batch_scores_each_sequence_as_it_scores_alone(seed: int) -> None:
    rng = random.Random(seed)
    # Lengths as in an SFT batch: several short sequences fit beside the longest one.
    prompts = [
        [257] + [rng.randrange(32, 127) for _ in range(rng.randrange(3, 40))] for _ in range(9)
    ]
    completions = [[rng.randrange(32, 127) for _ in range(rng.randrange(1, 12))] for _ in prompts]
    placed = pack_rows([len(p) + len(c) for p, c in zip(prompts, completions, strict=True)], 60)
    assert len({row for row, _ in placed}) < len(prompts)  # the batch really is packed

    policy = _policy()
    logp, mask = policy.token_logprobs(prompts, completions, temperature=0.7)
    weights = torch.linspace(-1.0, 1.0, logp.numel()).view_as(logp)
    policy.model.zero_grad()
    (logp * mask * weights).sum().backward()
    packed_grads = _grads(policy)

    policy.model.zero_grad()
    for i, (prompt, completion) in enumerate(zip(prompts, completions, strict=True)):
        alone, alone_mask = policy.token_logprobs([prompt], [completion], temperature=0.7)
        n = len(completion)
        assert mask[i].sum() == n
        assert torch.equal(alone_mask[0, :n], mask[i, :n])
        torch.testing.assert_close(
            logp[i, :n].detach(), alone[0, :n].detach(), atol=1e-5, rtol=1e-5
        )
        (alone[0, :n] * weights[i, :n]).sum().backward()
    for got, want in zip(packed_grads, _grads(policy), strict=True):
        # Nine backward passes add up in another order than one: rounding, at most ~1e-5.
        torch.testing.assert_close(got, want, atol=1e-4, rtol=1e-3)


def test_rows_are_filled_longest_first_without_overlap() -> None:
    lengths = [5, 9, 3, 10, 2, 9, 1]
    placed = pack_rows(lengths, 10)
    spans: dict[int, list[tuple[int, int]]] = {}
    for n, (row, start) in zip(lengths, placed, strict=True):
        assert start >= 0
        assert start + n <= 10
        spans.setdefault(row, []).append((start, start + n))
    for row_spans in spans.values():
        row_spans.sort()
        assert all(a[1] <= b[0] for a, b in itertools.pairwise(row_spans))
    assert len(spans) == 4  # 10 | 9+1 | 9 | 5+3+2: the least that first-fit decreasing finds
    assert placed == pack_rows(lengths, 10)  # the same batch packs the same way


def test_a_sequence_wider_than_the_row_is_refused() -> None:
    with pytest.raises(ValueError, match="12 tokens does not fit a row of 10"):
        pack_rows([3, 12], 10)


def test_an_empty_batch_is_refused_by_name() -> None:
    with pytest.raises(ValueError, match="at least one sequence"):
        _policy().token_logprobs([], [])
