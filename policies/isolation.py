"""Isolation policy: which sandbox backend a task gets, from its risk level.

The default mapping is trusted → `process` (bubblewrap, cheapest), default → `docker` (runc),
untrusted → `gvisor` (runsc, a user-space kernel between the program and the host). An experiment
config can override any entry, for example `{"untrusted": "docker"}` on a host without runsc, or
`{"default": "sim"}` for a stress test.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Literal, Protocol, get_args

import msgspec

from sandboxes import BACKENDS, BackendName, SandboxConfigError, SandboxSpec

RiskLevel = Literal["trusted", "default", "untrusted"]
RISK_LEVELS: tuple[RiskLevel, ...] = get_args(RiskLevel)

DEFAULT_BACKENDS: dict[RiskLevel, BackendName] = {
    "trusted": "process",
    "default": "docker",
    "untrusted": "gvisor",
}


class IsolationPolicy(Protocol):
    """Chooses the sandbox backend for a task."""

    def backend_for(self, risk: str) -> BackendName: ...


class RiskLevelIsolation:
    """Backend by risk level, with per-level overrides from config.

    :raises SandboxConfigError: for an unknown risk level or backend in the overrides.
    """

    name = "risk_level"

    def __init__(self, overrides: Mapping[str, str] | None = None) -> None:
        mapping: dict[RiskLevel, BackendName] = dict(DEFAULT_BACKENDS)
        for risk, backend in (overrides or {}).items():
            mapping[_check_risk(risk)] = _check_backend(risk, backend)
        self._mapping = mapping

    @property
    def mapping(self) -> dict[RiskLevel, BackendName]:
        return dict(self._mapping)

    def backend_for(self, risk: str) -> BackendName:
        return self._mapping[_check_risk(risk)]

    def spec_for(self, risk: str, base: SandboxSpec) -> SandboxSpec:
        """`base` with its backend chosen for `risk`."""
        return msgspec.structs.replace(base, backend=self.backend_for(risk))


def _check_risk(risk: str) -> RiskLevel:
    if risk not in RISK_LEVELS:
        raise SandboxConfigError(f"risk level: unknown {risk!r} (known: {', '.join(RISK_LEVELS)})")
    return risk


def _check_backend(risk: str, backend: str) -> BackendName:
    if backend not in BACKENDS:
        raise SandboxConfigError(
            f"isolation.{risk}: unknown backend {backend!r} (known: {', '.join(BACKENDS)})"
        )
    return backend


def isolation_from_config(config: Mapping[str, object] | None) -> RiskLevelIsolation:
    """The isolation policy from an experiment config's `isolation` table (may be empty)."""
    if not config:
        return RiskLevelIsolation()
    overrides = {str(k): str(v) for k, v in config.items()}
    return RiskLevelIsolation(overrides)
