"""Fuzzing the message decoder (runtime/messages.py) with the rollout vocabulary.

Any bytes decode to a valid message of the union or raise `MessageDecodeError` whose text says
what was expected and where (`$.field`). A decoded message has passed its own checks
(`__post_init__`), so a corrupt but well-formed message cannot smuggle in, say, `max_steps=0`.
"""

from __future__ import annotations

from typing import Any

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

from actors.rollouts import RolloutFinished, RolloutRequest, StepTiming
from actors.sandbox_worker import WorkerDone
from runtime import MessageDecoder, encode
from runtime.errors import MessageDecodeError
from tests.reliability.conftest import FUZZ

Wire = RolloutRequest | RolloutFinished | WorkerDone
decoder: MessageDecoder[Any] = MessageDecoder(Wire)

names = st.text(min_size=1, max_size=12)
finite = st.floats(allow_nan=False, allow_infinity=False, width=32)
requests = st.builds(
    RolloutRequest,
    rollout_id=names,
    task_id=st.text(max_size=12),
    max_steps=st.integers(1, 50),
    deadline_s=st.floats(0.001, 1e6),
    priority=st.integers(-(2**31), 2**31),
    sim_pass_step=st.none() | st.integers(0, 10),
)
finished = st.builds(
    RolloutFinished,
    rollout_id=names,
    task_id=names,
    group=names,
    runtime=names,
    tenant=names,
    status=st.sampled_from(["completed", "failed", "cancelled"]),
    reason=st.text(max_size=20),
    steps=st.lists(st.builds(StepTiming, finite, finite), max_size=3),
)
dones = st.builds(
    WorkerDone,
    rollout_id=names,
    attempt=st.integers(0, 5),
    outcome=st.sampled_from(["passed", "failed", "infra", "deadline", "error"]),
)
messages = st.one_of(requests, finished, dones)


def _decode_or_refuse(data: bytes) -> Any:
    try:
        message = decoder.decode(data)
    except MessageDecodeError as exc:
        error = str(exc)
    else:
        error = ""
    if error:
        assert error.startswith("cannot decode ")
        return None
    assert isinstance(message, RolloutRequest | RolloutFinished | WorkerDone)
    # Whatever came out passes its own validation again: nothing invalid got through.
    assert msgspec.convert(msgspec.to_builtins(message), type(message)) == message
    return message


@FUZZ
@given(message=messages)
def test_fuzz_messages_round_trip_exactly(message: Any) -> None:
    assert decoder.decode(encode(message)) == message


@FUZZ
@given(data=st.binary(max_size=200))
def test_fuzz_messages_random_bytes_decode_or_raise_message_decode_error(data: bytes) -> None:
    _decode_or_refuse(data)


@FUZZ
@given(message=messages, data=st.data())
def test_fuzz_messages_bit_flips_and_truncations_never_escape(
    message: Any, data: st.DataObject
) -> None:
    raw = bytearray(encode(message))
    kind = data.draw(st.sampled_from(["flip", "truncate", "insert", "delete"]))
    at = data.draw(st.integers(0, len(raw) - 1))
    if kind == "flip":
        raw[at] ^= 1 << data.draw(st.integers(0, 7))
    elif kind == "truncate":
        del raw[at:]
    elif kind == "insert":
        raw[at:at] = data.draw(st.binary(min_size=1, max_size=4))
    else:
        del raw[at]
    decoded = _decode_or_refuse(bytes(raw))
    if kind == "truncate":
        assert decoded is None  # a prefix of a message is never taken for a message


@FUZZ
@given(
    field=st.sampled_from(["rollout_id", "max_steps", "deadline_s", "priority", "tenant"]),
    value=st.one_of(
        st.none(), st.lists(st.integers(-(2**63), 2**63 - 1), max_size=2), st.binary(max_size=3)
    ),
)
def test_fuzz_messages_wrong_type_names_the_field(field: str, value: object) -> None:
    raw = msgspec.to_builtins(RolloutRequest(rollout_id="r", task_id="t"))
    raw[field] = value
    with pytest.raises(MessageDecodeError, match=rf"\$\.{field}"):
        decoder.decode(msgspec.msgpack.encode(raw))


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        (b"", "truncated"),
        (b"\xc1", "malformed"),
        (b"\x91" * 100_000, "Expected `object`"),  # deeply nested arrays
        (b"\xdd\xff\xff\xff\xff", "Expected `object`"),  # an array claiming 4 billion items
        (b"\xdf\xff\xff\xff\xff", "truncated"),  # a map claiming 4 billion entries
        (b"\x81\xa4type\xdb\xff\xff\xff\xff", "truncated"),  # a tag claiming 4 GiB
        (msgspec.msgpack.encode({"type": "Nope", "rollout_id": "r"}), "Invalid value 'Nope'"),
        (msgspec.msgpack.encode({"rollout_id": "r"}), "missing required field `type`"),
        (
            msgspec.msgpack.encode({"type": "RolloutRequest", "rollout_id": "", "task_id": "t"}),
            "rollout_id must not be empty",
        ),
        (
            msgspec.msgpack.encode(
                {"type": "RolloutRequest", "rollout_id": "r", "task_id": "t", "max_steps": 0}
            ),
            "max_steps must be >= 1",
        ),
        (
            msgspec.msgpack.encode(
                {"type": "RolloutRequest", "rollout_id": "r", "task_id": "t", "deadline_s": None}
            ),
            r"\$\.deadline_s",
        ),
    ],
)
def test_fuzz_messages_corpus_each_gets_a_clear_error(data: bytes, expected: str) -> None:
    with pytest.raises(MessageDecodeError, match=expected):
        decoder.decode(data)
