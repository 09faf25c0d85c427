"""The isolation suite (the same checks as `roost sandbox check`) on every real backend."""

from __future__ import annotations

import pytest

from sandboxes import SandboxSpec
from sandboxes.checks import CHECKS, run_check

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(90)]

# Where the process backend is weaker by design (no root: no memory cgroup, no sized tmpfs), the
# check must say "weaker", never a fake pass; everything else must pass everywhere.
WEAKER_ALLOWED = {
    ("process", "memory bomb is oom_killed, host unharmed"),
    ("process", "disk fill stops at the limit"),
}


@pytest.mark.parametrize("check", list(CHECKS))
async def test_isolation_check_holds(spec: SandboxSpec, check: str) -> None:
    outcome = await run_check(check, spec)
    allowed = {"pass", "weaker"} if (spec.backend, check) in WEAKER_ALLOWED else {"pass"}
    assert outcome.status in allowed, f"{spec.backend}: {check}: {outcome.detail}"
