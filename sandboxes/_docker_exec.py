"""The kill loop that runs inside a docker/gvisor sandbox, and the exec stream plumbing."""

from __future__ import annotations

from aiodocker.stream import Stream

from sandboxes._output import CappedBuffer

# Kill every process but PID 1, ourselves and the pids in $keep, until a scan of /proc finds none
# left (zombies are skipped: already dead, the init reaps them). Not `kill -9 -1`: under gVisor
# that also kills PID 1, which takes the whole container down.
SWEEP = r"""
keep=" 1 $$ ${keep-} "
while :; do
  n=0
  for d in /proc/[0-9]*; do
    p=${d#/proc/}
    case "$keep" in *" $p "*) continue ;; esac
    read -r st < "$d/stat" 2>/dev/null || continue
    case ${st##*) } in Z*) continue ;; esac
    kill -9 "$p" 2>/dev/null && n=$((n + 1))
  done
  [ "$n" = 0 ] && break
done
"""


class StreamTransport:
    """The exec helper's stdin and stdout: one long-lived, attached `docker exec` stream.

    What the helper writes to stderr (only a crash report) is kept, capped, for the error.
    """

    def __init__(self, stream: Stream) -> None:
        self.stream = stream
        self.stderr = CappedBuffer(4096)

    async def send(self, data: bytes) -> None:
        await self.stream.write_in(data)

    async def receive(self) -> bytes:
        while True:
            message = await self.stream.read_out()
            if message is None:
                return b""
            if message.stream != 2:
                return message.data
            self.stderr.feed(message.data)
