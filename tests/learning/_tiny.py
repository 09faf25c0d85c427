"""A tiny model and helpers shared by the learning tests."""

from __future__ import annotations

import threading
from collections.abc import Sequence

from policies.neural import Decoding
from policies.transformer import TransformerConfig, TransformerPolicy

TINY = TransformerConfig(d_model=32, n_layers=1, n_heads=2, max_len=64)
REAL: tuple[str, dict[str, object]] = (
    "asyncio",
    {},
)  # threads do real work: the virtual clock would jump past deadlines


def tiny_policy(seed: int = 0) -> TransformerPolicy:
    return TransformerPolicy(TINY, device="cpu", seed=seed)


class GatedPolicy(TransformerPolicy):
    """Holds its first `advance` until the test opens the gate (deterministic interleaving)."""

    def __init__(self, seed: int = 0) -> None:
        super().__init__(TINY, device="cpu", seed=seed)
        self.entered = threading.Event()
        self.release = threading.Event()
        self._held = False

    def advance(self, decoding: object, steps: int) -> int:
        if not self._held:
            self._held = True
            self.entered.set()
            self.release.wait(timeout=30)
        return super().advance(decoding, steps)


def prompts(n: int) -> Sequence[list[int]]:
    return [[257, 97 + i % 4, 61] for i in range(n)]


__all__ = ["REAL", "TINY", "Decoding", "GatedPolicy", "prompts", "tiny_policy"]
