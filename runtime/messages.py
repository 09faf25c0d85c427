"""The message base type and its wire format.

Messages are frozen, tagged `msgspec.Struct`s: immutable (safe to share between actors without
copying), cheap to build, and encodable to msgpack for an on-disk log or a wire. The tag is the
class name, so a union of message types decodes to the right class.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Generic, TypeVar

import msgspec

from runtime.errors import MessageDecodeError

__all__ = ["Message", "MessageDecoder", "decode", "encode"]


if TYPE_CHECKING:
    # mypy reads a frozen base as a frozen dataclass and then rejects every subclass that does
    # not repeat `frozen=True`; msgspec itself passes the setting down, so only mypy sees this.
    class Message(msgspec.Struct, tag=True, kw_only=True):
        """Base of every actor message. Subclass it; the subclass name becomes its tag."""

else:

    class Message(msgspec.Struct, frozen=True, tag=True, kw_only=True):
        """Base of every actor message. Subclass it; the subclass name becomes its tag."""


T = TypeVar("T")

_encoder = msgspec.msgpack.Encoder()


def encode(message: Any) -> bytes:
    """Encode a message (or any msgspec-supported value) to msgpack bytes."""
    return _encoder.encode(message)


class MessageDecoder(Generic[T]):
    """A typed msgpack decoder for one message type or a union of them.

    Decoding validates as it parses; a bad input raises `MessageDecodeError` whose text names
    the offending field path (for example ``Expected `int`, got `str` - at `$.count` ``).
    """

    def __init__(self, type: type[T] | Any) -> None:
        self._decoder: msgspec.msgpack.Decoder[T] = msgspec.msgpack.Decoder(type)
        self._type_name = getattr(type, "__name__", repr(type))

    def decode(self, data: bytes) -> T:
        """Decode one message.

        :raises MessageDecodeError: the bytes are not valid msgpack or not a valid message.
        """
        try:
            return self._decoder.decode(data)
        except msgspec.DecodeError as exc:
            raise MessageDecodeError(f"cannot decode {self._type_name}: {exc}") from None


def decode(data: bytes, type: type[T] | Any) -> T:
    """Decode msgpack bytes as `type` (a message class or a union); see `MessageDecoder`."""
    return MessageDecoder[T](type).decode(data)
