"""Host side of the exec helper (`_helper_main.py` runs inside the sandbox).

`Helper` speaks the framed protocol over a `HelperTransport`: the helper's stdin/stdout pipes
for the process backend, one long-lived `docker exec` stream for docker and gvisor. Requests are
strictly one at a time. Any failure half-way through a request (end of stream, a bad frame,
cancellation) leaves the conversation out of step, so the helper is then marked dead and the
backend replaces it; it is never talked to again.
"""

from __future__ import annotations

import json
import struct
from collections.abc import Coroutine
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, TypeVar

from sandboxes._errors import SandboxBrokenError
from sandboxes._output import CappedBuffer

HELPER_SOURCE = Path(__file__).with_name("_helper_main.py").read_text()
HELPER_ARGV = ["python3", "-I", "-S", "-c", HELPER_SOURCE]
"""How every backend starts the helper: the sandbox's own python3, isolated, without site."""

T = TypeVar("T")
_HEADER = struct.Struct(">cI")
_U32 = struct.Struct(">I")


class HelperLostError(SandboxBrokenError):
    """The exec helper stopped answering or broke the protocol; it must be replaced."""


class HelperExitedError(HelperLostError):
    """The helper's output ended: the helper process is gone (killed, crashed, or its sandbox
    died). Who is to blame is for the backend to find out (`HelperSandbox`)."""


class HelperTransport(Protocol):
    async def send(self, data: bytes) -> None: ...

    async def receive(self) -> bytes:
        """Some bytes from the helper's stdout; b"" once it has ended."""
        ...


@dataclass(frozen=True)
class RunReply:
    """How a command run by the helper ended: `status` is the shell-style exit status (128+N
    for signal N; None if it could not be collected), `clean` whether the kill loop confirmed
    that nothing was left running."""

    status: int | None
    timed_out: bool
    clean: bool


class Helper:
    """One conversation with one helper process."""

    def __init__(self, transport: HelperTransport) -> None:
        self._transport = transport
        self._buffer = bytearray()
        self.alive = True
        self.pid = 0
        self.command_running = False
        """Between the helper's S (starting) and X (ended) frames of a run: a command was
        running in the sandbox. Still true after the helper was lost during that command."""

    async def hello(self) -> None:
        """Wait for the helper's greeting. :raises HelperLostError: it never came."""
        doc = await self._guarded(self._expect_json(b"H"))
        self.pid = int(doc.get("pid", 0))

    async def run(
        self,
        argv: list[str],
        *,
        stdin: bytes | None,
        env: dict[str, str],
        cwd: str,
        timeout: float,
        out: CappedBuffer,
        err: CappedBuffer,
        sweep: bool = True,
    ) -> RunReply:
        """Run one command; its output goes into `out`/`err` (the helper sends at most one byte
        more than their limit, enough to say it was truncated)."""
        header = json.dumps(
            {
                "argv": argv,
                "env": env,
                "cwd": cwd,
                "timeout": timeout,
                "limit": max(out.limit, err.limit),
                "stdin": stdin is not None,
                "sweep": sweep,
            }
        ).encode()
        return await self._guarded(
            self._run(_U32.pack(len(header)) + header + (stdin or b""), out, err)
        )

    async def request(self, kind: bytes, doc: dict[str, Any], payload: bytes = b"") -> bytes:
        """A control request answered by one frame of the same kind; returns its payload."""
        body = json.dumps(doc).encode()
        if kind == b"L":
            body = _U32.pack(len(body)) + body + payload
        return await self._guarded(self._call(kind, body))

    async def ping(self) -> None:
        await self._guarded(self._call(b"P", b""))

    async def _run(self, body: bytes, out: CappedBuffer, err: CappedBuffer) -> RunReply:
        self.command_running = False
        await self._send(b"R", body)
        while True:
            kind, payload = await self._frame()
            if kind == b"O":
                out.feed(payload)
            elif kind == b"E":
                err.feed(payload)
            elif kind == b"S":
                self.command_running = True
            elif kind == b"X":
                self.command_running = False
                doc = json.loads(payload)
                return RunReply(doc["status"], bool(doc["timed_out"]), bool(doc["clean"]))
            else:
                raise HelperLostError(f"exec helper: unexpected frame {kind!r} during a run")

    async def _call(self, kind: bytes, body: bytes) -> bytes:
        await self._send(kind, body)
        got, payload = await self._frame()
        if got != kind:
            raise HelperLostError(f"exec helper: answered {got!r} to {kind!r}")
        return payload

    async def _expect_json(self, kind: bytes) -> dict[str, Any]:
        got, payload = await self._frame()
        if got != kind:
            raise HelperLostError(f"exec helper: expected {kind!r}, got {got!r}")
        doc: dict[str, Any] = json.loads(payload)
        return doc

    async def _guarded(self, work: Coroutine[Any, Any, T]) -> T:
        if not self.alive:
            work.close()
            raise HelperLostError("exec helper: already lost")
        try:
            return await work
        except HelperLostError:
            self.alive = False
            raise
        except (ValueError, KeyError, TypeError) as exc:
            self.alive = False
            raise HelperLostError(f"exec helper: bad answer: {exc}") from None
        except Exception as exc:  # the transport failed in a way of its own (aiohttp, ...)
            self.alive = False
            raise HelperLostError(f"exec helper: connection failed: {exc!r}") from None
        except BaseException:
            self.alive = False  # cancelled half-way: the conversation is out of step
            raise

    async def _send(self, kind: bytes, body: bytes) -> None:
        try:
            await self._transport.send(_HEADER.pack(kind, len(body)) + body)
        except (OSError, RuntimeError) as exc:
            raise HelperLostError(f"exec helper: cannot send a request: {exc}") from None

    async def _frame(self) -> tuple[bytes, bytes]:
        buffer = self._buffer
        while True:
            if len(buffer) >= _HEADER.size:
                kind, length = _HEADER.unpack_from(buffer)
                end = _HEADER.size + length
                if len(buffer) >= end:
                    payload = bytes(buffer[_HEADER.size : end])
                    del buffer[:end]
                    return kind, payload
            try:
                chunk = await self._transport.receive()
            except (OSError, RuntimeError) as exc:
                raise HelperLostError(f"exec helper: connection failed: {exc}") from None
            if not chunk:
                raise HelperExitedError("exec helper: it exited")
            buffer += chunk
