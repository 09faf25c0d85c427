"""Labels on every roost container, and the reaper that removes leftovers.

Each container carries `roost.owner=roost`, the run id of the process that made it and an expiry
time. Call `reap` at start (removes whatever has expired: leftovers of runs that crashed) and at
exit (removes everything of this run). `docker ps --filter label=roost.owner=roost` shows them.
"""

from __future__ import annotations

import json
import os
import secrets
import time
from typing import Any

import aiodocker
import anyio
import structlog

from sandboxes._docker_calls import daemon_call
from sandboxes._errors import DaemonError

log = structlog.get_logger(__name__)

OWNER_LABEL = "roost.owner"
OWNER = "roost"
RUN_LABEL = "roost.run_id"
EXPIRY_LABEL = "roost.expires_at"
SANDBOX_LABEL = "roost.sandbox"

RUN_ID = os.environ.get("ROOST_RUN_ID") or secrets.token_hex(6)
"""This process's run id (override with `$ROOST_RUN_ID`)."""

REAP_DEADLINE_S = 45.0
"""Most seconds one `reap` takes, however many containers: it runs shielded at exit, where a
daemon that lists but hangs on deletes would otherwise hold the exit for 30 s per container."""

REAP_CONCURRENCY = 8
"""Deletes in flight at once: enough to clear a pool quickly, few enough not to swamp dockerd."""


def container_labels(sandbox_id: str, *, lifetime_s: float, backend: str) -> dict[str, str]:
    return {
        OWNER_LABEL: OWNER,
        RUN_LABEL: RUN_ID,
        EXPIRY_LABEL: str(int(time.time() + lifetime_s)),
        SANDBOX_LABEL: sandbox_id,
        "roost.backend": backend,
    }


def _is_reapable(labels: dict[str, str], *, run_id: str | None, now: float, expired: bool) -> bool:
    if run_id is not None and labels.get(RUN_LABEL) == run_id:
        return True
    if not expired:
        return False
    try:
        return float(labels.get(EXPIRY_LABEL, "0")) <= now
    except ValueError:
        return True  # an unreadable expiry is a leftover nobody can account for


async def reap(
    docker: aiodocker.Docker,
    *,
    run_id: str | None = None,
    expired: bool = True,
    now: float | None = None,
    deadline_s: float = REAP_DEADLINE_S,
) -> list[str]:
    """Remove roost containers of `run_id` and (when `expired`) every expired one, up to
    `REAP_CONCURRENCY` at once.

    Returns the names removed. A container that vanished meanwhile is not an error; one the
    daemon refuses to remove is logged and left. What is not removed within `deadline_s` is
    left too, and logged by name.

    :raises DaemonError: the daemon could not list the containers.
    """
    now = time.time() if now is None else now
    filters = json.dumps({"label": [f"{OWNER_LABEL}={OWNER}"]})
    removed: list[str] = []
    pending: set[str] = set()  # deletes begun or queued, not yet answered
    listed = False
    with anyio.move_on_after(deadline_s) as deadline:
        async with daemon_call("list roost containers"):
            found: list[Any] = await docker.containers.list(all=True, filters=filters)
        listed = True
        limiter = anyio.CapacityLimiter(REAP_CONCURRENCY)

        async def remove(container: Any, name: str) -> None:
            async with limiter:
                try:
                    async with daemon_call(f"remove container {name}"):
                        await container.delete(force=True)
                    gone = True
                except DaemonError as exc:
                    gone = exc.status == 404  # it vanished meanwhile: as good as removed
                    if not gone:
                        log.warning("reaper.remove_failed", container=name, error=str(exc))
                pending.discard(name)
                if gone:
                    removed.append(name)

        async with anyio.create_task_group() as tg:
            for container in found:
                labels: dict[str, str] = container["Labels"] or {}
                if not _is_reapable(labels, run_id=run_id, now=now, expired=expired):
                    continue
                name = (container["Names"] or [container.id])[0].lstrip("/")
                pending.add(name)
                tg.start_soon(remove, container, name)
    if deadline.cancelled_caught:
        log.warning(
            "reaper.deadline_passed", after_s=deadline_s, listed=listed, left_behind=sorted(pending)
        )
    if removed:
        log.info("reaper.removed", count=len(removed), containers=removed)
    return removed
