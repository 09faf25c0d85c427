"""policies/isolation.py: risk level → backend, overridable from config."""

from __future__ import annotations

import pytest

from policies.isolation import DEFAULT_BACKENDS, RiskLevelIsolation, isolation_from_config
from sandboxes import SandboxConfigError, SandboxSpec


def test_default_mapping_puts_untrusted_work_in_gvisor() -> None:
    policy = RiskLevelIsolation()
    assert [policy.backend_for(r) for r in ("trusted", "default", "untrusted")] == [
        "process",
        "docker",
        "gvisor",
    ]
    assert DEFAULT_BACKENDS["untrusted"] == "gvisor"


def test_config_overrides_one_level_and_keeps_the_others() -> None:
    policy = isolation_from_config({"untrusted": "docker"})
    assert policy.mapping == {"trusted": "process", "default": "docker", "untrusted": "docker"}
    assert policy.spec_for("trusted", SandboxSpec(memory=2**27)).backend == "process"


@pytest.mark.parametrize(
    ("config", "message"),
    [({"paranoid": "gvisor"}, "risk level"), ({"untrusted": "firecracker"}, "isolation.untrusted")],
)
def test_bad_config_names_what_is_wrong(config: dict[str, str], message: str) -> None:
    with pytest.raises(SandboxConfigError, match=message):
        isolation_from_config(config)


def test_unknown_risk_level_is_refused() -> None:
    with pytest.raises(SandboxConfigError, match="unknown 'extreme'"):
        RiskLevelIsolation().backend_for("extreme")
