"""Isolation policy: which sandbox backend a task gets, from its risk (`Task.risk`).

A task file says how far its programs are trusted: `risk` is `low`, `medium` or `high`
(`tasks/_spec.py`). The suggested mapping is low → `process` (bubblewrap, cheapest), medium →
`docker` (runc), high → `gvisor` (runsc, a user-space kernel between the program and the host).
A run gives a base backend for every level and overrides some of them: `roost train` takes
`sandbox.backend` as the base and `sandbox.isolation` (for example `{high = "gvisor"}`) as the
overrides, so a run without overrides puts every task on one backend (docs/security.md).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol, get_args

import msgspec

from sandboxes import BACKENDS, BackendName, SandboxConfigError, SandboxSpec
from tasks import Risk

__all__ = [
    "DEFAULT_BACKENDS",
    "RISK_LEVELS",
    "IsolationPolicy",
    "RiskLevelIsolation",
    "check_backend",
    "isolation_from_config",
]

RISK_LEVELS: tuple[Risk, ...] = get_args(Risk)

DEFAULT_BACKENDS: dict[Risk, BackendName] = {
    "low": "process",
    "medium": "docker",
    "high": "gvisor",
}


class IsolationPolicy(Protocol):
    """Chooses the sandbox backend for a task."""

    def backend_for(self, risk: str) -> BackendName: ...


class RiskLevelIsolation:
    """Backend by risk level: `base` for every level (None: `DEFAULT_BACKENDS`), then the
    per-level `overrides`.

    :raises SandboxConfigError: for an unknown risk level or backend.
    """

    name = "risk_level"

    def __init__(
        self, overrides: Mapping[str, str] | None = None, *, base: str | None = None
    ) -> None:
        mapping: dict[Risk, BackendName] = dict(DEFAULT_BACKENDS)
        if base is not None:
            mapping = dict.fromkeys(RISK_LEVELS, check_backend("backend", base))
        for risk, backend in (overrides or {}).items():
            mapping[_check_risk(risk)] = check_backend(f"isolation.{risk}", backend)
        self._mapping = mapping

    @property
    def mapping(self) -> dict[Risk, BackendName]:
        return dict(self._mapping)

    def backend_for(self, risk: str) -> BackendName:
        return self._mapping[_check_risk(risk)]

    def spec_for(self, risk: str, base: SandboxSpec) -> SandboxSpec:
        """`base` with its backend chosen for `risk`."""
        return msgspec.structs.replace(base, backend=self.backend_for(risk))


def _check_risk(risk: str) -> Risk:
    for level in RISK_LEVELS:
        if risk == level:
            return level
    raise SandboxConfigError(f"risk level: unknown {risk!r} (known: {', '.join(RISK_LEVELS)})")


def check_backend(where: str, backend: str) -> BackendName:
    """`backend` as a backend name, or a SandboxConfigError naming `where` it was given."""
    for known in BACKENDS:
        if backend == known:
            return known
    raise SandboxConfigError(f"{where}: unknown backend {backend!r} (known: {', '.join(BACKENDS)})")


def isolation_from_config(
    config: Mapping[str, object] | None, *, base: str | None = None
) -> RiskLevelIsolation:
    """The isolation policy from an experiment config's `isolation` table (may be empty) over
    `base` (None: the suggested mapping)."""
    overrides = {str(k): str(v) for k, v in (config or {}).items()}
    return RiskLevelIsolation(overrides, base=base)
