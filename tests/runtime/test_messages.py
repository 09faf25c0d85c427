"""Messages: frozen, tagged, and every type round-trips through msgpack."""

from __future__ import annotations

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

from runtime import Message, MessageDecodeError, MessageDecoder, decode, encode


class Started(Message):
    run_id: str
    attempt: int = 0


class Scored(Message):
    rollout_id: int
    reward: float
    tokens: list[int]
    note: str | None = None


Event = Started | Scored


@given(
    run_id=st.text(),
    attempt=st.integers(min_value=-(2**63), max_value=2**63 - 1),
    rollout_id=st.integers(min_value=0, max_value=2**63 - 1),
    reward=st.floats(allow_nan=False),
    tokens=st.lists(st.integers(min_value=0, max_value=2**31)),
    note=st.none() | st.text(),
)
def test_every_message_type_round_trips(
    run_id: str, attempt: int, rollout_id: int, reward: float, tokens: list[int], note: str | None
) -> None:
    decoder = MessageDecoder(Event)
    for message in (
        Started(run_id=run_id, attempt=attempt),
        Scored(rollout_id=rollout_id, reward=reward, tokens=tokens, note=note),
    ):
        assert decoder.decode(encode(message)) == message
        assert decode(encode(message), type(message)) == message


def test_messages_are_frozen_and_tagged_by_class_name() -> None:
    message = Started(run_id="r1")
    with pytest.raises(AttributeError):
        message.run_id = "r2"  # type: ignore[misc]
    assert msgspec.msgpack.decode(encode(message))["type"] == "Started"


def test_decode_error_names_the_field_path() -> None:
    bad = msgspec.msgpack.encode(
        {"type": "Scored", "rollout_id": 1, "reward": "high", "tokens": []}
    )
    with pytest.raises(MessageDecodeError, match=r"cannot decode .*\$\.reward"):
        MessageDecoder(Event).decode(bad)
    with pytest.raises(MessageDecodeError, match="cannot decode Started"):
        decode(b"\xc1 not msgpack", Started)
