"""Which level the next RL task comes from: expected learning signal, the band, or uniform.

A GRPO group whose rollouts all pass or all fail has zero advantages: it teaches nothing. With
`tasks.curriculum = "signal"` (the default) each level is drawn in proportion to the chance
that a group of `group_size` rollouts there disagrees, `1 - f**G - (1 - p)**G`, where `p` is
the level's decayed pass rate from `policies.curriculum.Curriculum` (fed with every scored
rollout) and `f` its decayed first-attempt pass rate (`tasks.signal_rate = "first_turn"`):
each model turn is a sample with its own reward, so a group whose episodes all pass, some
after a revision, still has advantages at the first turn; only first attempts that all pass
teach nothing. (With `"episode"`, `f = p`: an easy level whose revisions rescue its failures
looked solved, and drew few tasks while its first attempts still failed one time in six.)
A solved level fades from the mix but comes back as soon as its rate slips (RL on
harder levels can erode an easy one), and a hard level is drawn as often as its rare passes
make it useful. `"band"` keeps the mix's rate inside `tasks.band` instead (levels outside get
only the exploration share; with `tasks.explore = 0`, the curriculum's own share for the
neighbours of the levels it draws, `BAND_NEIGHBOUR_EXPLORE`, so the band can move up to a
level not yet drawn). Either way a uniform `tasks.explore` share keeps every level
tried, and `tasks.test_only_share` is a floor on the draws that go to levels with tests only
(no demonstrations), the levels that only RL can learn.

Within a level, `tasks.forms = "signal"` thins the generator's stream by the same rule one
grain finer: a chain task is kept with probability `1 - f**G - (1 - p)**G` at its form's
decayed rates (the form: the kinds of its operations, "IIC" for `max((x + 3) * 2, 5)`). A
level's forms differ far more than its levels do: at level 3 `ICI` passes about half its first
attempts while `III`, a fifth of the stream, passes none (docs/training-log.md, "Session 31").
The rates' uniform prior keeps every form's chance at least about 1/7 (at G = 8 and the decay
0.98), so a form nothing passes is still tried, and one never seen is kept at once.
"""

from __future__ import annotations

import json
import random
from typing import Any

import msgspec

from policies.curriculum import Curriculum, CurriculumConfig, RateStats
from roost.train.config import TasksConfig

__all__ = ["LevelChooser", "group_signal"]

#: Under `band` with `tasks.explore = 0`, the share the curriculum gives each neighbour of a
#: level it draws (`CurriculumConfig.explore`'s default): with none, a level never drawn has
#: no rate, is never chosen, and the run stays on level 1 forever once level 1 passes.
BAND_NEIGHBOUR_EXPLORE = 0.05


def group_signal(rate: float, group_size: int, *, all_pass_rate: float | None = None) -> float:
    """The probability that `group_size` rollouts do not all agree: they all fail at pass rate
    `rate`, and all pass at `all_pass_rate` (default `rate`; the first-attempt rate, which is
    at most `rate`, when a group agrees only if every first attempt passes)."""
    passing = rate if all_pass_rate is None else all_pass_rate
    return max(0.0, 1.0 - passing**group_size - (1.0 - rate) ** group_size)


class LevelChooser:
    def __init__(
        self,
        config: TasksConfig,
        levels: list[int],
        *,
        group_size: int,
        seed: int,
        state: dict[str, Any] | None,
    ) -> None:
        self.levels = sorted(levels)
        self.mode = config.curriculum
        self.explore = config.explore
        self.group_size = group_size
        self.signal_rate = config.signal_rate
        self.test_only = [level for level in self.levels if level not in config.demo_levels]
        self.test_only_share = config.test_only_share if self.test_only else 0.0
        self._rng = random.Random(seed)
        # A positive `explore` already spreads draws over every level (`weights`); only
        # without it does the band need its neighbours' share to reach an unseen level.
        curriculum_config = CurriculumConfig(
            levels=max(self.levels),
            band=(config.band[0], config.band[1]),
            explore=0.0 if self.explore > 0 else BAND_NEIGHBOUR_EXPLORE,
        )
        self._decay = curriculum_config.decay
        state = dict(state or {})
        # A checkpoint from before first-attempt rates were kept has none: they start afresh.
        first = state.pop("first_turns", {})
        self.first_turns = {
            int(level): msgspec.convert(stats, RateStats) for level, stats in first.items()
        }
        self.forms_mode = config.forms
        # Per "level:form": the decayed rates of episodes and of first attempts.
        self.forms = {
            key: (msgspec.convert(pair[0], RateStats), msgspec.convert(pair[1], RateStats))
            for key, pair in state.pop("forms", {}).items()
        }
        if state:
            self.curriculum = Curriculum.from_bytes(
                json.dumps(state).encode(), curriculum_config, seed=seed
            )
        else:
            self.curriculum = Curriculum(curriculum_config, seed=seed)

    def weights(self) -> dict[int, float]:
        """The probability of each level in the next draw."""
        uniform = dict.fromkeys(self.levels, 1.0 / len(self.levels))
        if self.mode == "uniform":
            return self._with_test_only_floor(uniform)
        if self.mode == "signal":
            raw = {
                level: group_signal(
                    self.curriculum.level_rate(level),
                    self.group_size,
                    all_pass_rate=self._first_turn_rate(level),
                )
                for level in self.levels
            }
        else:
            band = self.curriculum.weights()
            raw = {level: band.get(level, 0.0) for level in self.levels}
        total = sum(raw.values())
        if total <= 0:
            return self._with_test_only_floor(uniform)
        mixed = {
            level: (1 - self.explore) * w / total + self.explore * uniform[level]
            for level, w in raw.items()
        }
        return self._with_test_only_floor(mixed)

    def _with_test_only_floor(self, weights: dict[int, float]) -> dict[int, float]:
        share = sum(weights[level] for level in self.test_only)
        floor = self.test_only_share
        if share >= floor:
            return weights
        # Scale the test-only levels up to the floor (keeping their proportions) and the
        # demonstrated levels down to the rest (share < floor <= 1, so 1 - share > 0).
        return {
            level: (w * floor / share if share > 0 else floor / len(self.test_only))
            if level in self.test_only
            else w * (1.0 - floor) / (1.0 - share)
            for level, w in weights.items()
        }

    def draw(self) -> int:
        weights = self.weights()
        return self._rng.choices(list(weights), weights=list(weights.values()))[0]

    def keep(self, level: int, form: str | None) -> bool:
        """Whether RL trains on a task of `form` (None: no form, always kept) drawn at
        `level`: always under `forms = "stream"`, else with the form's group signal."""
        if form is None or self.forms_mode == "stream":
            return True
        return self._rng.random() < self.form_signal(level, form)

    def form_signal(self, level: int, form: str) -> float:
        """The chance that a group of `form` at `level` disagrees (0.99 at G = 8 before any
        episode of it: the prior's rate is 1/2)."""
        episodes, firsts = self.forms.get(f"{level}:{form}", (RateStats(), RateStats()))
        rate = episodes.rate
        first = firsts.rate if self.signal_rate == "first_turn" else None
        return group_signal(rate, self.group_size, all_pass_rate=first)

    def scored(
        self, task_id: str, level: int, passed: bool, first_passed: bool, form: str | None = None
    ) -> None:
        """One scored episode: whether it passed on any turn, and on its first; `form` is
        the task's (`keep`), None for a task without one."""
        self.curriculum.record(task_id, level, passed)
        self.first_turns.setdefault(level, RateStats()).add(first_passed, self._decay)
        if form is not None:
            episodes, firsts = self.forms.setdefault(f"{level}:{form}", (RateStats(), RateStats()))
            episodes.add(passed, self._decay)
            firsts.add(first_passed, self._decay)

    def _first_turn_rate(self, level: int) -> float | None:
        if self.signal_rate == "episode":
            return None
        stats = self.first_turns.get(level)
        # No first attempts seen yet (a resumed older run): the episode rate stands in.
        return stats.rate if stats is not None and stats.total else None

    def state(self) -> dict[str, Any]:
        """What a checkpoint keeps (JSON): the decayed pass counts of episodes and of first
        attempts, per level and per form."""
        state: dict[str, Any] = json.loads(self.curriculum.to_bytes())
        state["first_turns"] = {
            str(level): msgspec.to_builtins(stats) for level, stats in self.first_turns.items()
        }
        state["forms"] = {key: msgspec.to_builtins(pair) for key, pair in self.forms.items()}
        return state
