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


def _alone(policy: TransformerPolicy, prompt: list[int]) -> Sample:
    return generate(policy, [prompt], max_new_tokens=12, temperature=0)[0]


def test_a_sequence_joined_mid_batch_decodes_as_it_would_alone() -> None:
    policy = tiny_policy()
    running = [[257, 97, 97, 97, 97, 97, 97, 61], [257, 98, 61], [257, 101, 102, 61]]
    late = [[257, 99, 61], [257, *[100] * 14, 61]]  # shorter, and longer, than the timeline
    later = [[257, 103, 104, 105, 61]]
    decoding = policy.start(running, max_new_tokens=12, temperature=0)
    policy.advance(decoding, 5)
    # Keep rows 2 and 1 (in that order); drop row 0, the longest prompt, unfinished: the
    # merged cache leaves its slots behind.
    joined = policy.join(decoding, [2, 1], late)
    policy.advance(joined, 3)
    joined = policy.join(joined, [0, 2, 3], later)  # drops the first joiner mid-decode
    while not joined.done:
        policy.advance(joined, 4)
    expected = [running[2], late[0], late[1], later[0]]
    for sample, prompt in zip(joined.samples(), expected, strict=True):
        alone = _alone(policy, prompt)
        assert sample.tokens == alone.tokens
        assert sample.logprobs == pytest.approx(alone.logprobs, abs=1e-5)
        assert len(sample.versions) == len(sample.tokens)


def test_joining_to_nothing_kept_is_a_fresh_start_and_bad_joins_are_refused() -> None:
    policy = tiny_policy()
    decoding = policy.start([[257, 98, 61]], max_new_tokens=12, temperature=0)
    policy.advance(decoding, 3)
    fresh = policy.join(decoding, [], [[257, 99, 61]])
    assert fresh.filled == 3  # the dropped row's slots were left behind
    while not fresh.done:
        policy.advance(fresh, 8)
    [sample], alone = fresh.samples(), _alone(policy, [257, 99, 61])
    assert sample.tokens == alone.tokens
    assert sample.logprobs == pytest.approx(alone.logprobs, abs=1e-5)
    with pytest.raises(ValueError, match="keep: rows must be distinct"):
        policy.join(policy.start([[257, 98]], max_new_tokens=4), [0, 0], [[257]])
    with pytest.raises(ValueError, match=r"keep: rows must be distinct and in 0\.\.0"):
        policy.join(policy.start([[257, 98]], max_new_tokens=4), [1], [[257]])
    with pytest.raises(ValueError, match="at least one prompt"):
        policy.join(policy.start([[257, 98]], max_new_tokens=4), [0], [])
    with pytest.raises(ValueError, match="max_len"):
        policy.join(policy.start([[257, 98]], max_new_tokens=10), [0], [[257] * 60])
    with pytest.raises(TypeError, match="not a decoding started by TransformerPolicy"):
        policy.join(object(), [], [[257]])


def test_repeated_prompts_share_one_prompt_pass_and_still_sample_apart() -> None:
    policy = tiny_policy()
    task, other = [257, 98, 61, 99], [257, 97, 97, 61]
    alone = generate(policy, [task], max_new_tokens=8, temperature=0)[0]
    greedy = generate(policy, [task, other, task, task], max_new_tokens=8, temperature=0)
    for row in (0, 2, 3):  # each copy decodes as the prompt alone does
        assert greedy[row].tokens == alone.tokens
        assert greedy[row].logprobs == pytest.approx(alone.logprobs, abs=1e-5)
    assert greedy[1].tokens == generate(policy, [other], max_new_tokens=8, temperature=0)[0].tokens
    sampled = generate(policy, [task] * 8, max_new_tokens=8, temperature=1.0, seed=1)
    assert len({tuple(s.tokens) for s in sampled}) > 1  # one pass, eight independent draws
