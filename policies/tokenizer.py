"""A byte-level tokenizer: every UTF-8 byte is a token, plus three specials.

Bytes need no vocabulary file, cannot meet an unknown character, and keep the embedding table
small (259 rows), which suits the few-million-parameter default model.
"""

from __future__ import annotations

__all__ = ["ByteTokenizer"]


class ByteTokenizer:
    """Tokens 0..255 are bytes; `pad`, `bos` and `eos` follow."""

    pad = 256
    bos = 257
    eos = 258
    vocab_size = 259

    def encode(self, text: str, *, bos: bool = True) -> list[int]:
        """The bytes of `text`, after a BOS token unless `bos` is False."""
        ids = list(text.encode("utf-8"))
        return [self.bos, *ids] if bos else ids

    def decode(self, ids: list[int]) -> str:
        """Text from token ids; stops at the first EOS, skips other specials.

        :raises ValueError: an id outside the vocabulary.
        """
        out = bytearray()
        for token in ids:
            if not 0 <= token < self.vocab_size:
                raise ValueError(
                    f"token id {token} outside the vocabulary (0..{self.vocab_size - 1})"
                )
            if token == self.eos:
                break
            if token < 256:
                out.append(token)
        return out.decode("utf-8", errors="replace")
