"""The RL level draw: expected group signal, the curriculum's band, or uniform; an exploration
share and a floor on the test-only levels."""

from __future__ import annotations

import msgspec
import pytest

from roost.train.config import TasksConfig
from roost.train.levels import LevelChooser, group_signal


def _fed(
    chooser: LevelChooser, *, easy_passes: int = 40, easy_first_passes: int | None = None
) -> LevelChooser:
    """Level 1 too easy (by default), level 2 half passing, level 3 never passing. Every
    episode that passes does so at its first attempt unless `easy_first_passes` says fewer
    of level 1's did (the rest were rescued by a revision)."""
    first = easy_passes if easy_first_passes is None else easy_first_passes
    for i in range(40):
        chooser.scored(f"a{i}", 1, i < easy_passes, i < first)
        chooser.scored(f"b{i}", 2, i % 2 == 0, i % 2 == 0)
        chooser.scored(f"c{i}", 3, False, False)
    return chooser


def _chooser(levels: tuple[int, ...] = (1, 2, 3), **config: object) -> LevelChooser:
    tasks = TasksConfig(levels=list(levels), **config)  # type: ignore[arg-type]
    return LevelChooser(tasks, list(levels), group_size=8, seed=0, state=None)


def test_group_signal_is_zero_at_the_extremes_and_largest_at_one_half() -> None:
    assert group_signal(0.0, 8) == 0.0
    assert group_signal(1.0, 8) == 0.0
    assert group_signal(0.5, 8) == pytest.approx(1 - 2 / 256)
    assert group_signal(0.1, 8) > group_signal(0.02, 8) > 0.0


def test_group_signal_counts_a_group_as_agreeing_only_when_every_first_attempt_passes() -> None:
    # Every episode passes (rate 1) but a fifth of first attempts fail: most groups disagree.
    assert group_signal(1.0, 8, all_pass_rate=0.8) == pytest.approx(1 - 0.8**8)
    assert group_signal(0.5, 8, all_pass_rate=0.5) == group_signal(0.5, 8)
    assert group_signal(0.0, 8, all_pass_rate=0.0) == 0.0


def test_signal_draws_a_level_whose_first_attempts_fail_though_revisions_rescue_them() -> None:
    rescued = _fed(_chooser(), easy_first_passes=32)  # every episode passes, 80 % at once
    assert rescued.weights()[1] > 2 * _fed(_chooser()).weights()[1]
    by_episode = _fed(_chooser(signal_rate="episode"), easy_first_passes=32)
    assert by_episode.weights() == pytest.approx(_fed(_chooser(signal_rate="episode")).weights())


def test_signal_favours_the_level_whose_groups_disagree_and_keeps_every_level() -> None:
    weights = _fed(_chooser(explore=0.15)).weights()
    assert sum(weights.values()) == pytest.approx(1.0)
    assert max(weights, key=lambda level: weights[level]) == 2
    assert all(w >= 0.15 / 3 - 1e-9 for w in weights.values())  # the exploration floor
    assert weights[2] > 0.6


def test_signal_draws_an_easy_level_again_once_its_rate_slips() -> None:
    solved = _fed(_chooser())
    slipped = _fed(_chooser(), easy_passes=32)  # 80 % instead of 100 %
    assert slipped.weights()[1] > 2 * solved.weights()[1]


def test_the_band_favours_the_level_inside_it() -> None:
    weights = _fed(_chooser(curriculum="band", explore=0.15)).weights()
    assert max(weights, key=lambda level: weights[level]) == 2
    assert weights[2] > 0.8
    assert all(w >= 0.15 / 3 - 1e-9 for w in weights.values())


def test_uniform_ignores_the_outcomes() -> None:
    weights = _fed(_chooser(curriculum="uniform")).weights()
    assert weights == {1: 1 / 3, 2: 1 / 3, 3: 1 / 3}


@pytest.mark.parametrize("mode", ["signal", "band", "uniform"])
def test_the_test_only_floor_holds_whatever_the_rule(mode: str) -> None:
    # Levels 1 (solved) and 3 (never passed) have tests only: every rule gives them < 70 %.
    unfloored = _fed(_chooser(curriculum=mode, demo_levels=[2])).weights()
    assert unfloored[1] + unfloored[3] < 0.7
    weights = _fed(_chooser(curriculum=mode, demo_levels=[2], test_only_share=0.7)).weights()
    assert sum(weights.values()) == pytest.approx(1.0)
    assert weights[1] + weights[3] == pytest.approx(0.7)
    # Inside the test-only levels the rule's proportions are kept.
    assert weights[1] / weights[3] == pytest.approx(unfloored[1] / unfloored[3])


def test_the_floor_does_not_lower_a_larger_test_only_share() -> None:
    chooser = _fed(_chooser(demo_levels=[1], test_only_share=0.1))
    assert chooser.weights() == _fed(_chooser(demo_levels=[1])).weights()


def test_the_floor_is_ignored_when_every_level_has_demonstrations() -> None:
    chooser = _chooser((1, 2), demo_levels=[1, 2], test_only_share=0.5)
    assert chooser.test_only == []
    assert sum(chooser.weights().values()) == pytest.approx(1.0)


def test_a_bad_floor_is_a_clear_error() -> None:
    with pytest.raises(ValueError, match="test_only_share"):
        TasksConfig(test_only_share=1.5)


def test_the_state_survives_a_checkpoint_round_trip() -> None:
    before = _fed(_chooser(), easy_first_passes=30)
    state = msgspec.json.decode(msgspec.json.encode(before.state()))
    after = LevelChooser(TasksConfig(), [1, 2, 3], group_size=8, seed=1, state=state)
    assert after.weights() == before.weights()
    draws = {after.draw() for _ in range(200)}
    assert draws == {1, 2, 3}


def test_a_checkpoint_without_first_attempt_rates_loads_and_uses_the_episode_rates() -> None:
    state = _fed(_chooser()).state()
    del state["first_turns"]  # as checkpointed before first-attempt rates were kept
    resumed = LevelChooser(TasksConfig(), [1, 2, 3], group_size=8, seed=0, state=state)
    by_episode = _fed(_chooser(signal_rate="episode"))
    assert resumed.weights() == pytest.approx(by_episode.weights())
