"""Which sandboxes a task's programs run in: the pool key of its risk's backend.

A run has one sandbox pool. Its keys name what a sandbox is: the runtime alone (`python`) for
the run's own `sandbox.backend`, as in a run without `sandbox.isolation`, and
`runtime@backend` (`python@gvisor`) for a backend that `sandbox.isolation` gives some risk
levels (`policies/isolation.py`). A rollout carries its task's key as its `runtime`, so the
scheduler's runtime affinity and quotas route it to a sandbox of that backend, and the
held-out checks lease by the same key.
"""

from __future__ import annotations

from collections.abc import Iterable

import msgspec

from policies.isolation import RiskLevelIsolation, check_backend, isolation_from_config
from roost.train.config import SandboxSection
from sandboxes import SandboxSpec
from tasks import Task

__all__ = ["SandboxRouting"]


class SandboxRouting:
    """Task → pool key, and pool key → sandbox spec, for one run's `[sandbox]` section."""

    def __init__(self, section: SandboxSection) -> None:
        self.runtime = section.runtime
        self.backend = section.backend
        self.policy: RiskLevelIsolation = isolation_from_config(
            section.isolation, base=section.backend
        )

    def key_for_risk(self, risk: str) -> str:
        backend = self.policy.backend_for(risk)
        return self.runtime if backend == self.backend else f"{self.runtime}@{backend}"

    def key_for(self, task: Task) -> str:
        """The pool key of the sandboxes `task`'s programs run in."""
        return self.key_for_risk(task.risk)

    def keys(self, risks: Iterable[str]) -> list[str]:
        """The pool keys a run with tasks of these risk levels uses, the run's own first."""
        keys = {self.key_for_risk(risk) for risk in risks}
        return sorted(keys, key=lambda key: (key != self.runtime, key))

    def spec_for(self, key: str, base: SandboxSpec) -> SandboxSpec:
        """`base` (limits, images) as the sandbox of pool key `key`."""
        runtime, _, named = key.partition("@")
        backend = check_backend(f"pool key {key!r}", named) if named else self.backend
        return msgspec.structs.replace(base, runtime=runtime, backend=backend)

    def backends(self, risks: Iterable[str]) -> set[str]:
        """The backends a run with tasks of these risk levels starts sandboxes on."""
        return {self.policy.backend_for(risk) for risk in risks}
