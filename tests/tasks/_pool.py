from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator

from sandboxes._spec import SandboxSpec
from sandboxes.pool import SandboxPool
from sandboxes.process import ProcessSandbox


@contextlib.asynccontextmanager
async def process_pool(capacity: int) -> AsyncIterator[SandboxPool]:
    """A pool of real bubblewrap sandboxes."""
    spec = SandboxSpec(backend="process")
    async with SandboxPool(lambda key: ProcessSandbox(spec), capacity=capacity) as pool:
        yield pool
