"""policies/isolation.py: task risk level → backend, overridable from config."""

from __future__ import annotations

from typing import get_args

import pytest

from policies.isolation import (
    DEFAULT_BACKENDS,
    RISK_LEVELS,
    RiskLevelIsolation,
    isolation_from_config,
)
from sandboxes import SandboxConfigError, SandboxSpec
from tasks import Risk


def test_the_policy_speaks_the_task_files_risk_levels() -> None:
    # One vocabulary: a level a task file can name is one the policy maps, and no other.
    assert RISK_LEVELS == get_args(Risk) == ("low", "medium", "high")
    assert set(DEFAULT_BACKENDS) == set(RISK_LEVELS)


def test_default_mapping_puts_high_risk_work_in_gvisor() -> None:
    policy = RiskLevelIsolation()
    assert [policy.backend_for(r) for r in ("low", "medium", "high")] == [
        "process",
        "docker",
        "gvisor",
    ]


def test_config_overrides_one_level_and_keeps_the_others() -> None:
    policy = isolation_from_config({"high": "docker"})
    assert policy.mapping == {"low": "process", "medium": "docker", "high": "docker"}
    assert policy.spec_for("low", SandboxSpec(memory=2**27)).backend == "process"


def test_a_base_backend_covers_every_level_the_overrides_leave() -> None:
    policy = isolation_from_config({"high": "gvisor"}, base="process")
    assert policy.mapping == {"low": "process", "medium": "process", "high": "gvisor"}


@pytest.mark.parametrize(
    ("config", "base", "message"),
    [
        ({"paranoid": "gvisor"}, None, "risk level"),
        ({"high": "firecracker"}, None, "isolation.high"),
        ({}, "vm", "backend: unknown backend 'vm'"),
    ],
)
def test_bad_config_names_what_is_wrong(
    config: dict[str, str], base: str | None, message: str
) -> None:
    with pytest.raises(SandboxConfigError, match=message):
        isolation_from_config(config, base=base)


def test_unknown_risk_level_is_refused() -> None:
    with pytest.raises(SandboxConfigError, match="unknown 'extreme'"):
        RiskLevelIsolation().backend_for("extreme")
