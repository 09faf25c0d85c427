"""The default transformer and the byte tokenizer."""

from __future__ import annotations

import pytest

from policies.neural import generate
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
