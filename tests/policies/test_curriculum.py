"""The curriculum holds the band on a learner whose skill grows, drops zero-variance groups,
reports easy, hard and flaky tasks, and checkpoints its state."""

from __future__ import annotations

import math
import random

import msgspec
import pytest

from policies.curriculum import Curriculum, CurriculumConfig, collect_groups

BAND = (0.3, 0.7)


class Learner:
    """Pass probability falls with the level and rises with skill, which grows every step."""

    def __init__(self, seed: int = 0) -> None:
        self.skill = 0.5
        self.rng = random.Random(seed)
        self.drawn: list[bool] = []

    def rollout(self, level: int) -> tuple[str, list[bool]]:
        p = 1 / (1 + math.exp(-2.0 * (self.skill - level)))
        outcomes = [self.rng.random() < p for _ in range(8)]
        self.drawn += outcomes
        return f"L{level}-{self.rng.randrange(10**9)}", outcomes


def test_the_mix_stays_in_the_band_while_skill_grows() -> None:
    curriculum = Curriculum(CurriculumConfig(levels=7, band=BAND), seed=1)
    learner = Learner()
    rates, levels = [], []
    for step in range(300):
        learner.skill = 0.5 + 7.0 * step / 300
        learner.drawn = []
        kept = collect_groups(curriculum, learner.rollout, 16)
        assert len(kept) == 16
        rates.append(sum(learner.drawn) / len(learner.drawn))
        levels.append(max(curriculum.weights().items(), key=lambda kv: kv[1])[0])
    in_band = [BAND[0] <= r <= BAND[1] for r in rates[20:]]
    assert sum(in_band) / len(in_band) >= 0.9
    assert levels[-1] > levels[50] > levels[0]  # it followed the learner up


def test_zero_variance_groups_never_reach_the_learner() -> None:
    curriculum = Curriculum(CurriculumConfig(levels=3), seed=2)
    rng = random.Random(3)

    def rollout(level: int) -> tuple[str, list[bool]]:
        kind = rng.choice(["all_pass", "all_fail", "mixed"])
        outcomes = {
            "all_pass": [True] * 4,
            "all_fail": [False] * 4,
            "mixed": [True, False, rng.random() < 0.5, False],
        }[kind]
        return f"t{rng.randrange(100)}", outcomes

    kept = collect_groups(curriculum, rollout, 50)
    assert len(kept) == 50
    assert all(len(set(outcomes)) == 2 for _, outcomes in kept)
    report = curriculum.report()
    assert report.groups_dropped > 0
    assert report.groups_seen == 50 + report.groups_dropped


def test_a_learner_that_always_passes_cannot_spin_forever() -> None:
    curriculum = Curriculum(CurriculumConfig(levels=2))
    kept = collect_groups(curriculum, lambda level: ("t", [True] * 4), 3, max_draws=30)
    assert kept == []
    assert curriculum.state.groups_dropped == 30


def test_the_report_names_easy_hard_and_flaky_tasks() -> None:
    curriculum = Curriculum(CurriculumConfig(levels=2, min_attempts=8))
    for i in range(10):
        curriculum.record("easy", 1, True)
        curriculum.record("hard", 2, False)
        curriculum.record("mid", 1, i % 2 == 0)
    curriculum.record("flaky", 1, True, solution="abc")
    curriculum.record("flaky", 1, False, solution="abc")
    curriculum.record("stable", 1, True, solution="abc")
    curriculum.record("stable", 1, False, solution="xyz")
    report = curriculum.report()
    assert report.too_easy == ["easy"]
    assert report.too_hard == ["hard"]
    assert report.flaky == ["flaky"]


def test_the_state_round_trips_through_bytes() -> None:
    curriculum = Curriculum(CurriculumConfig(levels=3), seed=5)
    for i in range(40):
        curriculum.record(f"t{i % 7}", 1 + i % 3, i % 3 == 0, solution=str(i % 2))
    curriculum.admit_group("g", 2, [True, False])
    data = curriculum.to_bytes()
    restored = Curriculum.from_bytes(data, CurriculumConfig(levels=3), seed=5)
    assert restored.state == curriculum.state
    assert restored.weights() == curriculum.weights()
    assert restored.report() == curriculum.report()
    with pytest.raises(msgspec.ValidationError):
        Curriculum.from_bytes(b'{"levels": {"1": "lots"}}')


def test_bad_configuration_is_refused() -> None:
    with pytest.raises(ValueError, match="band"):
        CurriculumConfig(band=(0.8, 0.2))
    with pytest.raises(ValueError, match="level"):
        Curriculum(CurriculumConfig(levels=2)).record("t", 3, True)


@pytest.mark.parametrize(
    ("fields", "named"),
    [
        ({"max_tracked_tasks": 0}, "max_tracked_tasks"),
        ({"too_easy": 0.05, "too_hard": 0.05}, "too_hard, too_easy"),
        ({"too_easy": float("nan")}, "too_hard, too_easy"),
        ({"too_hard": -0.1}, "too_hard, too_easy"),
        ({"min_attempts": -1}, "min_attempts"),
    ],
)
def test_a_config_that_would_fail_later_is_refused_naming_the_field(
    fields: dict[str, float], named: str
) -> None:
    # max_tracked_tasks=0 used to pass and then raise StopIteration at the first `record`;
    # a NaN or inverted threshold silently reported nothing (or everything).
    with pytest.raises(ValueError, match=named):
        CurriculumConfig(**fields)  # type: ignore[arg-type]


def test_a_table_of_one_task_forgets_the_oldest() -> None:
    curriculum = Curriculum(CurriculumConfig(max_tracked_tasks=1))
    curriculum.record("a", 1, True)
    curriculum.record("b", 1, False)
    assert list(curriculum.state.tasks) == ["b"]


def test_a_resumed_curriculum_draws_what_an_uninterrupted_one_would() -> None:
    config = CurriculumConfig(levels=5, band=BAND)
    curriculum = Curriculum(config, seed=7)
    for level in (1, 2, 3, 4, 5):
        curriculum.admit_group(f"t{level}", level, [True, False, level < 3, False])
    for _ in range(10):
        curriculum.sample_level()
    restored = Curriculum.from_bytes(curriculum.to_bytes(), config, seed=7)
    # The generator used to restart from the seed, repeating the run's first draws.
    assert [restored.sample_level() for _ in range(50)] == [
        curriculum.sample_level() for _ in range(50)
    ]
