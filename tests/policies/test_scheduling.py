"""Each scheduling policy's promise, checked on hand-built queues."""

from __future__ import annotations

import random
from collections.abc import Iterable

import pytest

from policies.scheduling import (
    POLICIES,
    ClassKey,
    PendingClass,
    PendingRollout,
    SchedulingPolicy,
    make_policy,
    register,
)


class View:
    def __init__(
        self,
        now: float = 0.0,
        warm: dict[str, int] | None = None,
        weights: dict[str, float] | None = None,
        dispatched: dict[str, int] | None = None,
        durations: dict[tuple[str, str], float] | None = None,
    ) -> None:
        self._now = now
        self._warm = warm or {}
        self._weights = weights or {}
        self._dispatched = dispatched or {}
        self._durations = durations or {}

    @property
    def now(self) -> float:
        return self._now

    def warm(self, runtime: str) -> int:
        return self._warm.get(runtime, 0)

    def weight(self, group: str) -> float:
        return self._weights.get(group, 1.0)

    def dispatched(self, group: str) -> int:
        return self._dispatched.get(group, 0)

    def expected_duration(self, group: str, runtime: str) -> float | None:
        return self._durations.get((group, runtime))


def queue(
    group: str,
    items: Iterable[tuple[int, float]],
    *,
    runtime: str = "python",
    priority: int = 0,
) -> PendingClass:
    cls = PendingClass(ClassKey(group, runtime, "default", priority))
    for seq, enqueued_at in items:
        cls.items.append(PendingRollout(seq, enqueued_at, request=None))
    return cls


def test_fifo_takes_the_oldest_head() -> None:
    a = queue("a", [(5, 5.0)])
    b = queue("b", [(2, 2.0), (7, 7.0)])
    assert make_policy("fifo").choose([a, b], View(), random.Random(0)) == (b, 0)


def test_priority_serves_higher_first_and_aging_prevents_starvation() -> None:
    policy = make_policy("priority", {"aging_per_s": 0.1})
    low = queue("low", [(1, 0.0)], priority=0)

    def fresh_high(now: float) -> PendingClass:  # high-priority work that keeps arriving
        return queue("high", [(2, now)], priority=5)

    # Gap of 5 at 0.1 per second: the low one waits at most 50 s.
    assert policy.choose([low, fresh_high(40.0)], View(now=40.0), random.Random(0))[0] is not low
    assert policy.choose([low, fresh_high(51.0)], View(now=51.0), random.Random(0))[0] is low
    # Without aging, it would wait for ever.
    no_aging = make_policy("priority", {"aging_per_s": 0.0})
    assert no_aging.choose([low, fresh_high(1e9)], View(now=1e9), random.Random(0))[0] is not low


def test_fair_share_serves_the_group_furthest_below_its_weight() -> None:
    a = queue("a", [(1, 0.0)])
    b = queue("b", [(2, 0.0)])
    view = View(weights={"a": 1.0, "b": 3.0}, dispatched={"a": 10, "b": 25})
    # a: 10/1 = 10, b: 25/3 = 8.3 -> b is behind its share.
    assert make_policy("fair_share").choose([a, b], view, random.Random(0))[0] is b


def _serve(policy: SchedulingPolicy, view: View, groups: list[str], rounds: int) -> list[str]:
    """`rounds` choices among `groups` (each always queued), counting each dispatch."""
    served = []
    for seq in range(rounds):
        candidates = [queue(g, [(seq * len(groups) + i, 0.0)]) for i, g in enumerate(groups)]
        pick, _ = policy.choose(candidates, view, random.Random(0))
        view._dispatched[pick.group] = view._dispatched.get(pick.group, 0) + 1
        served.append(pick.group)
    return served


def test_fair_share_does_not_starve_old_groups_when_a_new_one_arrives() -> None:
    # By raw counts since the start, "b" (arriving after 100 dispatches of "a") took the next
    # 100 dispatches alone; it starts at "a"'s standing instead, and they alternate.
    policy, view = make_policy("fair_share"), View(weights={"a": 1.0, "b": 1.0})
    assert _serve(policy, view, ["a"], 100) == ["a"] * 100
    served = _serve(policy, view, ["a", "b"], 20)
    assert served.count("b") == 10, served
    assert served[:2] == ["b", "a"]  # the newcomer first (the oldest head), then turn about


def test_fair_share_banks_no_credit_for_an_idle_spell_and_keeps_the_weights() -> None:
    policy, view = make_policy("fair_share"), View(weights={"a": 1.0, "b": 3.0})
    served = _serve(policy, view, ["a", "b"], 40)
    assert served.count("b") == 30  # 3 : 1 while both are queued
    _serve(policy, view, ["a"], 50)  # "b" idle
    served = _serve(policy, view, ["a", "b"], 40)
    assert 29 <= served.count("b") <= 31, served  # back at 3 : 1, not 50 in a row


def test_runtime_affinity_prefers_a_warm_runtime_over_an_older_cold_one() -> None:
    cold = queue("a", [(1, 0.0)], runtime="node")
    warm = queue("b", [(9, 9.0)], runtime="python")
    policy = make_policy("runtime_affinity")
    assert policy.choose([cold, warm], View(warm={"python": 1}), random.Random(0))[0] is warm
    assert policy.choose([cold, warm], View(), random.Random(0))[0] is cold


def test_shortest_first_uses_learned_durations_and_measures_unknown_kinds_first() -> None:
    slow = queue("slow", [(1, 0.0)])
    fast = queue("fast", [(2, 0.0)])
    new = queue("new", [(3, 0.0)])
    durations = {("slow", "python"): 30.0, ("fast", "python"): 2.0}
    policy = make_policy("shortest_first")
    assert policy.choose([slow, fast], View(durations=durations), random.Random(0))[0] is fast
    assert policy.choose([slow, fast, new], View(durations=durations), random.Random(0))[0] is new


def test_random_is_uniform_over_pending_rollouts_and_seeded() -> None:
    a = queue("a", [(i, 0.0) for i in range(3)])
    b = queue("b", [(10, 0.0)])
    policy = make_policy("random")
    rng = random.Random(42)
    picks = [policy.choose([a, b], View(), rng) for _ in range(4000)]
    share_b = sum(1 for cls, _ in picks if cls is b) / len(picks)
    assert share_b == pytest.approx(0.25, abs=0.03)
    again = [policy.choose([a, b], View(), random.Random(42)) for _ in range(1)]
    assert again[0] == picks[0]


def test_unknown_policy_and_bad_options_are_named() -> None:
    with pytest.raises(ValueError, match=r"unknown scheduling policy 'lifo'; known: .*fifo"):
        make_policy("lifo")
    with pytest.raises(ValueError, match="'priority': bad options"):
        make_policy("priority", {"speed": 3})


def test_a_researcher_registers_a_policy_by_name() -> None:
    @register("test_newest_first")
    class NewestFirst:
        def choose(self, candidates, view, rng):  # type: ignore[no-untyped-def]
            newest = max(candidates, key=lambda c: c.items[-1].seq)
            return newest, len(newest) - 1

    try:
        a = queue("a", [(1, 0.0), (4, 0.0)])
        b = queue("b", [(3, 0.0)])
        assert make_policy("test_newest_first").choose([a, b], View(), random.Random(0)) == (a, 1)
        with pytest.raises(ValueError, match="already registered"):
            register("test_newest_first")(NewestFirst)
    finally:
        POLICIES.pop("test_newest_first")


@pytest.mark.parametrize("aging", [-1.0, float("nan"), float("inf")])
def test_priority_refuses_an_aging_rate_that_breaks_the_order(aging: float) -> None:
    # NaN used to pass (NaN < 0 is False) and made every effective priority NaN, so the pick
    # followed list order; inf * 0 waited is NaN too.
    with pytest.raises(ValueError, match=r"'priority': bad options: aging_per_s"):
        make_policy("priority", {"aging_per_s": aging})


@pytest.mark.parametrize("weight", [0.0, -1.0, float("nan")])
def test_fair_share_names_the_group_with_an_unusable_weight(weight: float) -> None:
    # Weight 0 raised a bare ZeroDivisionError; a negative one served the group that had
    # had the most; NaN made the pick depend on the candidates' order.
    a = queue("a", [(1, 0.0)])
    bad = queue("bad", [(2, 0.0)])
    view = View(weights={"bad": weight}, dispatched={"a": 5, "bad": 1})
    with pytest.raises(ValueError, match=r"group 'bad' has weight"):
        make_policy("fair_share").choose([a, bad], view, random.Random(0))
