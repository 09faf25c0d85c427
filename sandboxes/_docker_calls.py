"""Every call to the Docker daemon goes through `daemon_call`: a deadline, and errors translated
into the sandbox taxonomy once, with the call's name attached (httpx-style context)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import aiodocker
import aiohttp
import anyio

from sandboxes._errors import DaemonError, DaemonTimeoutError

DAEMON_TIMEOUT_S = 30.0


@asynccontextmanager
async def daemon_call(what: str, *, timeout: float = DAEMON_TIMEOUT_S) -> AsyncIterator[None]:
    """Run the body under a deadline of `timeout` seconds.

    :raises DaemonTimeoutError: when the deadline passes.
    :raises DaemonError: for an error answer (`.status` holds the HTTP status) or an unreachable
        daemon (status 0). Cancellation from outside passes through untouched.
    """
    try:
        with anyio.fail_after(timeout):
            yield
    except TimeoutError:
        raise DaemonTimeoutError(
            f"{what}: the Docker daemon did not answer in {timeout:g}s"
        ) from None
    except aiodocker.DockerError as exc:
        message = exc.message if isinstance(exc.message, str) else str(exc.message)
        raise DaemonError(f"{what}: {message}", status=exc.status) from None
    except (aiohttp.ClientError, OSError) as exc:
        raise DaemonError(f"{what}: cannot reach the Docker daemon: {exc}", status=0) from None


def docker_client() -> aiodocker.Docker:
    """A client of the local daemon.

    :raises DaemonError: (status 0) no daemon socket exists, for example while the daemon
        restarts: aiodocker asserts then, and an assertion must not pass for a bug.
    """
    try:
        return aiodocker.Docker()
    except (AssertionError, ValueError, OSError) as exc:
        raise DaemonError(
            f"connect: cannot reach the Docker daemon: {exc or 'no daemon socket'}", status=0
        ) from None
