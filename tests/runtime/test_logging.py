"""Log lines from inside an actor carry the actor's name and the message type."""

from __future__ import annotations

import json

import pytest
import structlog

from runtime import Actor, ActorSystem, configure_logging, handler
from tests.runtime._actors import Note, Read

pytestmark = pytest.mark.anyio


class Chatty(Actor):
    @handler
    def note(self, msg: Note) -> None:
        structlog.get_logger("test").info("got_note", seq=msg.seq)

    @handler
    def read(self, msg: Read) -> int:
        return 0


async def test_json_log_lines_carry_actor_and_message_type(
    capsys: pytest.CaptureFixture[str],
) -> None:
    configure_logging(format="json", level="info")
    try:
        async with ActorSystem(lag_interval=None) as system:
            ref = system.spawn(Chatty, name="chatty")
            await ref.tell(Note(sender=0, seq=4))
            await ref.ask(Read(), timeout=1.0)
        lines = [json.loads(line) for line in capsys.readouterr().err.splitlines() if line]
    finally:
        structlog.reset_defaults()
    got = [line for line in lines if line["event"] == "got_note"]
    assert got == [
        {
            "event": "got_note",
            "seq": 4,
            "actor": "chatty",
            "msg_type": "Note",
            "level": "info",
            "timestamp": got[0]["timestamp"],
        }
    ]
