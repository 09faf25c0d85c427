"""The default transformer and the byte tokenizer."""

from __future__ import annotations

import pytest

from policies.neural import Sample, generate
from policies.tokenizer import ByteTokenizer
from policies.transformer import TransformerPolicy
from tests.learning._tiny import tiny_policy


def test_a_sequence_does_not_depend_on_its_batch_company() -> None:
    policy = tiny_policy()
    alone = generate(policy, [[257, 98, 61]], max_new_tokens=8, temperature=0)
    padded = generate(
        policy, [[257, 97, 97, 97, 97, 61], [257, 98, 61]], max_new_tokens=8, temperature=0
    )
    assert alone[0].tokens == padded[1].tokens
    assert alone[0].logprobs == pytest.approx(padded[1].logprobs, abs=1e-5)


def test_the_default_model_has_a_few_million_parameters() -> None:
    assert 1_000_000 < TransformerPolicy(device="cpu").num_parameters() < 10_000_000


def test_bad_generation_arguments_are_refused() -> None:
    policy = tiny_policy()
    with pytest.raises(ValueError, match="at least one token"):
        policy.start([[]], max_new_tokens=4)
    with pytest.raises(ValueError, match="max_len"):
        policy.start([[257] * 60], max_new_tokens=10)


def test_bytes_round_trip_and_specials_are_skipped() -> None:
    tok = ByteTokenizer()
    ids = tok.encode("héllo")
    assert ids[0] == tok.bos
    assert tok.decode([*ids, tok.eos, 97]) == "héllo"
    with pytest.raises(ValueError, match="outside the vocabulary"):
        tok.decode([999])


def _decode(policy: TransformerPolicy, prompts: list[list[int]], chunk: int) -> list[Sample]:
    decoding = policy.start(prompts, max_new_tokens=12, temperature=1.0, seed=7)
    while not decoding.done:
        policy.advance(decoding, chunk)
    return decoding.samples()


def test_how_decoding_is_chunked_does_not_change_what_is_sampled() -> None:
    policy = tiny_policy()
    prompts = [[257, 97 + i] * (1 + i % 3) + [61] for i in range(6)]
    by_one, by_five, at_once = (_decode(policy, prompts, chunk) for chunk in (1, 5, 1000))
    assert by_one == by_five == at_once
    assert all(1 <= len(s.tokens) <= 12 for s in by_one)
    assert all(len(s.tokens) == len(s.logprobs) == len(s.versions) for s in by_one)


def test_cached_decoding_scores_tokens_as_the_full_forward_pass_does() -> None:
    policy = tiny_policy()
    prompts = [[257, 97 + i] * (1 + i % 3) + [61] for i in range(6)]
    samples = _decode(policy, prompts, 3)
    logp, mask = policy.token_logprobs(prompts, [s.tokens for s in samples])
    for i, sample in enumerate(samples):
        n = len(sample.tokens)
        assert mask[i, :n].sum().item() == n
        assert logp[i, :n].tolist() == pytest.approx(sample.logprobs, abs=1e-4)


def test_a_finished_decoding_advances_no_further() -> None:
    policy = tiny_policy()
    decoding = policy.start([[257, 98, 61]], max_new_tokens=1)
    assert decoding.done
    assert policy.advance(decoding, 8) == 0
    assert len(decoding.samples()[0].tokens) == 1


def test_finished_rows_can_be_read_before_the_batch_ends() -> None:
    policy = tiny_policy()
    prompts = [[257, 97 + i] * (1 + i % 3) + [61] for i in range(6)]
    whole = _decode(policy, prompts, 1000)
    decoding = policy.start(prompts, max_new_tokens=12, temperature=1.0, seed=7)
    seen: dict[int, Sample] = {}
    while not decoding.done:
        policy.advance(decoding, 1)
        ended = decoding.ended()
        assert set(seen) <= set(ended)  # a finished row stays finished
        fresh = [i for i in ended if i not in seen]
        seen.update(zip(fresh, decoding.samples(fresh), strict=True))
    assert sorted(seen) == list(range(len(prompts)))
    assert [seen[i] for i in range(len(prompts))] == whole  # read early, nothing changed after
