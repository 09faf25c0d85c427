"""The RL level draw: the curriculum's band with an exploration floor, or uniform."""

from __future__ import annotations

import msgspec

from roost.train.config import TasksConfig
from roost.train.levels import LevelChooser


def _fed(chooser: LevelChooser) -> LevelChooser:
    for i in range(40):
        chooser.scored(f"a{i}", 1, True)  # too easy
        chooser.scored(f"b{i}", 2, i % 2 == 0)  # in the band
        chooser.scored(f"c{i}", 3, False)  # nobody passes yet
    return chooser


def test_the_band_favours_the_level_whose_groups_disagree_and_keeps_every_level() -> None:
    config = TasksConfig(levels=[1, 2, 3], explore=0.15)
    weights = _fed(LevelChooser(config, [1, 2, 3], seed=0, state=None)).weights()
    assert abs(sum(weights.values()) - 1.0) < 1e-9
    assert max(weights, key=lambda level: weights[level]) == 2
    assert all(w >= 0.15 / 3 - 1e-9 for w in weights.values())  # the exploration floor
    assert weights[2] > 0.8


def test_uniform_ignores_the_outcomes() -> None:
    config = TasksConfig(levels=[1, 2, 3], curriculum="uniform")
    weights = _fed(LevelChooser(config, [1, 2, 3], seed=0, state=None)).weights()
    assert weights == {1: 1 / 3, 2: 1 / 3, 3: 1 / 3}


def test_the_state_survives_a_checkpoint_round_trip() -> None:
    config = TasksConfig(levels=[1, 2, 3])
    before = _fed(LevelChooser(config, [1, 2, 3], seed=0, state=None))
    state = msgspec.json.decode(msgspec.json.encode(before.state()))
    after = LevelChooser(config, [1, 2, 3], seed=1, state=state)
    assert after.weights() == before.weights()
    draws = {after.draw() for _ in range(200)}
    assert draws == {1, 2, 3}
