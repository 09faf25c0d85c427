"""The off-policy corrections refuse clip settings that would silently change the objective.

The staleness book's own tests (a discrete-event model of the loop) live in
tests/learning/test_staleness.py.
"""

from __future__ import annotations

import pytest
import torch

from policies.staleness import CORRECTIONS, make_correction


@pytest.mark.parametrize("name", CORRECTIONS)
@pytest.mark.parametrize(
    ("options", "named"),
    [
        ({"eps": -0.2}, "eps"),
        ({"eps": float("nan")}, "eps"),
        ({"cap": 0.5}, "cap"),
        ({"cap": 0.0}, "cap"),
        ({"cap": float("nan")}, "cap"),
    ],
)
def test_a_malformed_clip_is_refused_naming_it(
    name: str, options: dict[str, float], named: str
) -> None:
    with pytest.raises(ValueError, match=rf"{name}: {named}"):
        make_correction(name, **options)


@pytest.mark.parametrize("name", CORRECTIONS)
def test_on_policy_tokens_keep_their_advantage(name: str) -> None:
    # Behaviour = proximal = current: ratio 1, so the objective is the advantage itself. A
    # negative eps used to turn it into (1 - |eps|) * A without complaint.
    correction = make_correction(name)
    logp = torch.full((3,), -1.5)
    advantages = torch.tensor([1.0, -0.5, 2.0])
    out = correction.surrogate(logp, logp, logp, advantages)
    assert torch.equal(out.objective, advantages)
    assert not bool(out.clipped.any())


def test_an_infinite_cap_means_no_cap() -> None:
    correction = make_correction("decoupled", cap=float("inf"))
    out = correction.surrogate(torch.zeros(1), torch.tensor([-30.0]), torch.zeros(1), torch.ones(1))
    assert float(out.is_weight[0]) == pytest.approx(float(torch.exp(torch.tensor(30.0))))
