"""Run an async entry point on the right event loop.

Real work runs on asyncio with uvloop when it is installed (plain asyncio otherwise).
Simulation runs on `VirtualClockEventLoop`, where time jumps whenever every task waits.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import anyio

from runtime.clock import VirtualClockEventLoop

__all__ = ["run", "uvloop_available"]

T = TypeVar("T")


def uvloop_available() -> bool:
    try:
        import uvloop  # noqa: F401
    except ImportError:
        return False
    return True


def run(
    main: Callable[..., Awaitable[T]],
    *args: Any,
    virtual_clock: bool = False,
    use_uvloop: bool = True,
) -> T:
    """Run `main(*args)` to completion and return its result.

    :param virtual_clock: run on simulated time (see `runtime.clock`); implies plain asyncio.
    :param use_uvloop: use uvloop when it is installed and the clock is real.
    """
    options: dict[str, Any] = {}
    if virtual_clock:
        options["loop_factory"] = VirtualClockEventLoop
    elif use_uvloop and uvloop_available():
        options["use_uvloop"] = True
    return anyio.run(main, *args, backend="asyncio", backend_options=options)
