"""1,000 lease/reset cycles (fewer on docker and gvisor in CI, see CYCLES) leave no growth in
processes, open files, containers or memory. Counts are taken after a warm-up (the first cycles
fill caches and connection pools) and again at the end; the test asserts they are equal
(memory: within a small bound)."""

from __future__ import annotations

import gc
import json
import os
from dataclasses import dataclass

import aiodocker
import pytest

from sandboxes import RUN_ID, SandboxSpec, create_sandbox
from sandboxes.pool import SandboxPool

pytestmark = [pytest.mark.anyio]

# 1,000 on the process backend; docker and gvisor cycles cost a daemon and a slower kernel, so
# CI runs fewer there ($ROOST_LEAK_CYCLES overrides all three, e.g. 1000 for a full run).
CYCLES = {"process": 1000, "docker": 300, "gvisor": 150}
WARM_UP = 50
RSS_GROWTH_LIMIT = 16 * 1024 * 1024


@dataclass(frozen=True)
class Footprint:
    host_processes: int  # our descendants (bubblewrap, helpers, docker clients)
    open_files: int  # our file descriptors
    containers: int  # containers of this run
    rss: int  # our resident memory, bytes


def _descendants(root: int) -> int:
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as f:
                ppid = int(f.read().rpartition(b")")[2].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        children.setdefault(ppid, []).append(int(entry))
    count, todo = 0, list(children.get(root, []))
    while todo:
        pid = todo.pop()
        count += 1
        todo.extend(children.get(pid, []))
    return count


def _rss() -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


async def _footprint(docker: aiodocker.Docker | None) -> Footprint:
    gc.collect()
    containers = 0
    if docker is not None:
        filters = json.dumps({"label": [f"roost.run_id={RUN_ID}"]})
        containers = len(await docker.containers.list(all=True, filters=filters))
    return Footprint(
        host_processes=_descendants(os.getpid()),
        open_files=len(os.listdir("/proc/self/fd")),
        containers=containers,
        rss=_rss(),
    )


@pytest.mark.timeout(600)
async def test_a_thousand_lease_reset_cycles_leak_nothing(backend: str) -> None:
    cycles = int(os.environ.get("ROOST_LEAK_CYCLES") or CYCLES[backend])
    spec = SandboxSpec(backend=backend)  # type: ignore[arg-type]
    docker = aiodocker.Docker() if backend != "process" else None
    options = {"docker": docker} if docker is not None else {}
    try:
        async with SandboxPool(lambda key: create_sandbox(spec, **options), capacity=2) as pool:
            after_warm_up: Footprint | None = None
            for cycle in range(cycles):
                async with pool.lease("k") as a, pool.lease("k") as b:
                    await a.exec(["sh", "-c", f"echo {cycle} > n; sleep 60 & true"])
                    await b.put_file("f", b"x" * 1000)
                await pool.settle()
                if cycle == WARM_UP:
                    after_warm_up = await _footprint(docker)
            at_end = await _footprint(docker)
            stats = pool.statistics()
    finally:
        if docker is not None:
            await docker.close()
    assert after_warm_up is not None
    assert at_end.host_processes == after_warm_up.host_processes
    assert at_end.open_files == after_warm_up.open_files
    assert at_end.containers == after_warm_up.containers
    assert at_end.rss - after_warm_up.rss < RSS_GROWTH_LIMIT
    assert stats.cold_starts == 2  # the same two sandboxes, reset and validated every cycle
    assert stats.resets == 2 * cycles
    assert stats.validation_failures == 0
