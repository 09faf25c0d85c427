"""Shared test configuration: anyio tests run on asyncio under the virtual clock by default.

Virtual time makes every timeout and timer in a test exact and instant; a test that needs the
real clock (or uvloop) asks for it with `@pytest.mark.parametrize("anyio_backend", [...])`.
"""

from __future__ import annotations

from typing import Any

import pytest

from runtime.clock import VirtualClockEventLoop

VIRTUAL = pytest.param(("asyncio", {"loop_factory": VirtualClockEventLoop}), id="virtual")
REAL = pytest.param(("asyncio", {"use_uvloop": True}), id="uvloop")


@pytest.fixture
def anyio_backend() -> Any:
    return ("asyncio", {"loop_factory": VirtualClockEventLoop})
