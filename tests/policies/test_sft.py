"""SFT's configuration is checked when it is made, and its rate schedule has no division by
zero. Training itself is tested in tests/learning/test_sft.py."""

from __future__ import annotations

import pytest

from policies.sft import SFTConfig, lr_at, sft
from tests.learning._tiny import tiny_policy


@pytest.mark.parametrize(
    ("fields", "named"),
    [
        ({"batch_size": 0}, "batch_size"),
        ({"steps": -1}, "steps"),
        ({"lr": -1e-3}, "lr"),
        ({"lr": float("nan")}, "lr"),
        ({"weight_decay": -0.1}, "weight_decay"),
        ({"max_grad_norm": 0.0}, "max_grad_norm"),
        ({"max_grad_norm": float("nan")}, "max_grad_norm"),
        ({"time_budget_s": -1.0}, "time_budget_s"),
        ({"time_budget_s": float("nan")}, "time_budget_s"),
    ],
)
def test_a_malformed_config_is_refused_naming_the_field(
    fields: dict[str, float], named: str
) -> None:
    # batch_size=0 used to fail at the first step as "token_logprobs needs at least one
    # sequence"; max_grad_norm=0 zeroed every gradient and trained nothing, silently.
    with pytest.raises(ValueError, match=named):
        SFTConfig(**fields)  # type: ignore[arg-type]


def test_a_linear_rate_with_no_time_left_is_zero_not_a_division_by_zero() -> None:
    # The SFT-only control runs for the RL phase's wall time, which is 0.0 when the run was
    # out of time before RL began: the first step divided by it.
    config = SFTConfig(steps=10, lr=1e-2, decay="linear", time_budget_s=0.0)
    assert lr_at(config, 0, 0.0) == 0.0
    assert lr_at(SFTConfig(steps=0, lr=1e-2, decay="linear"), 0, 0.0) == 0.0


def test_a_run_with_no_time_leaves_the_weights_as_they_were() -> None:
    policy = tiny_policy()
    before = policy.state_dict()
    config = SFTConfig(steps=5, batch_size=2, lr=1e-2, decay="linear", time_budget_s=0.0)
    result = sft(policy, [("a=", "1")], config)
    assert result.steps == 1
    after = policy.state_dict()
    assert all(bool((after[k] == v).all()) for k, v in before.items())
