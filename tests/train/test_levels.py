"""The RL level draw: expected group signal, the curriculum's band, or uniform; an exploration
share and a floor on the test-only levels."""

from __future__ import annotations

import collections
from pathlib import Path

import msgspec
import pytest

from roost.train.config import TasksConfig
from roost.train.levels import LevelChooser, group_signal
from roost.train.task_source import TaskSource
from tasks._chain_ast import parse_chain
from tasks.procedural import chain_form

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


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


def test_the_band_without_exploration_still_moves_up_from_a_solved_level() -> None:
    # Level 1 always passes, level 2 half the time, level 3 never. With no uniform share the
    # curriculum's neighbour share is the only way to a level never drawn.
    chooser = _chooser(curriculum="band", explore=0.0)
    drawn: collections.Counter[int] = collections.Counter()
    for i in range(3000):
        level = chooser.draw()
        drawn[level] += 1
        passed = level == 1 or (level == 2 and i % 2 == 0)
        chooser.scored(f"t{i}", level, passed, passed)
    assert set(drawn) == {1, 2, 3}
    assert drawn[2] > drawn[1] + drawn[3]  # the band's level, once found, takes the most


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


def _fed_forms(chooser: LevelChooser, *, with_forms: bool = True) -> LevelChooser:
    """At level 3, form "III" never passes and "ICI" passes half its first attempts."""
    for i in range(60):
        chooser.scored(f"x{i}", 3, False, False, form="III" if with_forms else None)
        chooser.scored(f"y{i}", 3, i % 2 == 0, i % 2 == 0, form="ICI" if with_forms else None)
    return chooser


def test_forms_stream_keeps_every_task_and_leaves_the_level_draws_as_they_were() -> None:
    plain = _fed_forms(_chooser(forms="stream"), with_forms=False)
    fed = _fed_forms(_chooser(forms="stream"))
    assert all(fed.keep(3, "III") for _ in range(100))
    assert [fed.draw() for _ in range(50)] == [plain.draw() for _ in range(50)]


def test_forms_signal_keeps_a_form_by_its_group_signal() -> None:
    chooser = _fed_forms(_chooser(forms="signal"))
    never, half = chooser.form_signal(3, "III"), chooser.form_signal(3, "ICI")
    assert half > 0.95
    # The prior keeps a form nothing passes at about 1/7 (G = 8, decay 0.98), never at 0.
    assert 0.1 < never < 0.2
    kept = sum(chooser.keep(3, "III") for _ in range(2000)) / 2000
    assert kept == pytest.approx(never, abs=0.03)
    assert sum(chooser.keep(3, "ICI") for _ in range(200)) > 180
    # A form never seen, and a task without a form, are kept.
    assert chooser.form_signal(3, "NNN") > 0.95
    assert all(chooser.keep(3, None) for _ in range(100))
    # Forms are counted per level: "III" at level 4 has no history.
    assert chooser.form_signal(4, "III") > 0.95


def test_form_rates_survive_a_checkpoint_and_a_checkpoint_without_them_loads() -> None:
    before = _fed_forms(_chooser(forms="signal"))
    state = msgspec.json.decode(msgspec.json.encode(before.state()))
    after = LevelChooser(TasksConfig(forms="signal"), [1, 2, 3], group_size=8, seed=1, state=state)
    assert after.form_signal(3, "III") == before.form_signal(3, "III")
    del state["forms"]  # as checkpointed before form rates were kept
    older = LevelChooser(TasksConfig(forms="signal"), [1, 2, 3], group_size=8, seed=1, state=state)
    assert older.form_signal(3, "III") > 0.95
    assert older.weights() == after.weights()


@pytest.mark.parametrize("style", ["expression", "steps"])
def test_a_chain_task_has_the_form_of_its_operations(style: str) -> None:
    source = TaskSource(TasksConfig(levels=[1, 2, 3], solution_style=style))  # type: ignore[arg-type]
    expressions = TaskSource(TasksConfig(levels=[1, 2, 3]))
    forms = set()
    for level in (1, 2, 3):
        for index in range(40):
            task, _ = source.train_task(level, index)
            form = source.form(task)
            assert form is not None
            assert len(form) == level
            assert set(form) <= set("INC")
            # The same form however the demonstration is written.
            expression = expressions.train_task(level, index)[0]
            steps = parse_chain(expression.canonical_solution or "") or []
            assert form == chain_form(kind for kind, _ in steps)
            forms.add(form)
    assert len(forms) > 10


def test_list_levels_and_task_files_have_no_form() -> None:
    source = TaskSource(TasksConfig(levels=[1, 5], demo_levels=[1], heldout_per_level=2))
    assert source.form(source.train_task(5, 0)[0]) is None
    jsonl = TaskSource(
        TasksConfig(source="jsonl", path=str(EXAMPLES / "tasks" / "humaneval.jsonl")),
        base_dir=EXAMPLES.parent,
    )
    assert jsonl.heldout()
    assert all(jsonl.form(task) is None for task in jsonl.heldout())


def test_an_unknown_forms_mode_is_a_clear_error() -> None:
    with pytest.raises(msgspec.ValidationError, match="forms"):
        msgspec.convert({"forms": "sometimes"}, TasksConfig)
