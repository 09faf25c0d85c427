"""Small actors and messages shared by the runtime tests."""

from __future__ import annotations

import anyio

from runtime import Actor, Message, handler


class Note(Message):
    sender: int
    seq: int


class Add(Message):
    amount: int


class Read(Message):
    pass


class Crash(Message):
    reason: str = "boom"


class Hold(Message):
    """Block the handler until the test opens the gate."""


class Recorder(Actor):
    """Keeps every message it receives (in a list the test owns, so it survives restarts)."""

    def __init__(self, seen: list[object], gate: anyio.Event | None = None) -> None:
        self.seen = seen
        self.gate = gate

    @handler(Note, Add)
    def record(self, msg: Note | Add) -> None:
        self.seen.append(msg)

    @handler(Hold)
    async def hold(self, msg: Hold) -> None:
        self.seen.append(msg)
        if self.gate is not None:
            await self.gate.wait()

    @handler(Crash)
    def crash(self, msg: Crash) -> None:
        raise RuntimeError(msg.reason)

    @handler(Read)
    def read(self, msg: Read) -> int:
        return len(self.seen)


class Counter(Actor):
    def __init__(self) -> None:
        self.total = 0

    @handler
    def add(self, msg: Add) -> None:
        self.total += msg.amount

    @handler
    async def read(self, msg: Read) -> int:
        return self.total

    @handler
    def crash(self, msg: Crash) -> None:
        raise RuntimeError(msg.reason)
