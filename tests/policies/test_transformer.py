"""The default transformer refuses inputs it would otherwise answer wrongly or crash on late.
Its behaviour is tested in tests/learning/test_transformer.py and its neighbours."""

from __future__ import annotations

import pytest

from policies.neural import use_threads
from policies.transformer import TransformerConfig
from tests.learning._tiny import tiny_policy


@pytest.mark.parametrize(
    ("fields", "named"),
    [
        ({"n_heads": 0}, "n_heads"),
        ({"d_model": 0}, "d_model"),
        ({"n_layers": 0}, "n_layers"),
        ({"max_len": 1}, "max_len"),
        ({"vocab_size": 256}, "vocab_size"),
    ],
)
def test_a_malformed_config_is_refused_naming_the_field(fields: dict[str, int], named: str) -> None:
    # n_heads=0 raised a bare ZeroDivisionError; a vocabulary without the tokenizer's pad,
    # bos and eos failed only at the first padded batch.
    with pytest.raises(ValueError, match=named):
        TransformerConfig(**fields)  # type: ignore[arg-type]


def test_token_logprobs_refuses_an_empty_prompt() -> None:
    # The first completion token is predicted at the prompt's last position: for an empty
    # prompt that was column -1, so its log-probability came from another sequence's logits
    # and changed with what it was batched with.
    policy = tiny_policy()
    with pytest.raises(ValueError, match="prompt 1 is empty"):
        policy.token_logprobs([[257, 97], []], [[98], [97, 98]])


def test_use_threads_refuses_a_negative_count() -> None:
    with pytest.raises(ValueError, match="threads: must be >= 0"):
        use_threads(-1)
