"""What runs inside a docker/gvisor sandbox around each command, and the exec stream plumbing."""

from __future__ import annotations

import contextlib

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
WRAPPER = 'env -- "$@"; s=$?\n' + SWEEP + "exit $s\n"
# gVisor (the 2022 runsc here) gives an exec's stdout and stderr pipes that accept short writes,
# and programs that do not retry (Python's buffered stdout among them) silently lose output. So
# the program writes into pipes inside the sandbox, which behave, and `cat` (which retries)
# copies them out. Falls back to the direct pipes if /tmp is unusable.
GVISOR_WRAPPER = (
    r"""
io=$(mktemp -d /tmp/.roost-io.XXXXXX 2>/dev/null) && mkfifo "$io/o" "$io/e" || io=
if [ -n "$io" ]; then
  cat "$io/o" & co=$!
  cat "$io/e" >&2 & ce=$!
  keep="$co $ce"
  env -- "$@" >"$io/o" 2>"$io/e"; s=$?
else
  env -- "$@"; s=$?
fi
"""
    + SWEEP
    + r"""
if [ -n "$io" ]; then wait "$co" "$ce"; rm -rf "$io"; fi
exit $s
"""
)
RESET_SCRIPT = (
    'chmod -R u+rwX -- "$1" /tmp 2>/dev/null; '
    'rm -rf -- "$1"/* "$1"/.[!.]* "$1"/..?* /tmp/* /tmp/.[!.]* /tmp/..?*; '
    'for f in "$1"/* "$1"/.[!.]* "$1"/..?*; do [ -e "$f" ] || [ -L "$f" ] && exit 1; done; exit 0'
)


async def pump_output(stream: Stream, out: CappedBuffer, err: CappedBuffer) -> None:
    """Demultiplex the exec stream into stdout and stderr until it ends."""
    while True:
        message = await stream.read_out()
        if message is None:
            return
        (err if message.stream == 2 else out).feed(message.data)


async def send_stdin(stream: Stream, data: bytes) -> None:
    """Send stdin, then half-close the connection so the program sees end-of-file."""
    with contextlib.suppress(OSError, RuntimeError):
        for i in range(0, len(data), 65536):
            await stream.write_in(data[i : i + 65536])
    # aiodocker only offers a full close; the hijacked connection supports a half-close, which
    # is the only way to deliver EOF on stdin while still reading the output.
    response = getattr(stream, "_resp", None)
    transport = getattr(getattr(response, "connection", None), "transport", None)
    if transport is not None and transport.can_write_eof():
        transport.write_eof()
