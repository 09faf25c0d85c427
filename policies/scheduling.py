"""Scheduling policies: which pending rollout gets the next free worker and sandbox.

A policy is a pure decision. The scheduler groups pending rollouts into FIFO *classes* (one per
group, runtime, tenant and priority), filters out the classes that quotas, the admission gate or
the sandbox pool block right now, and asks the policy to pick one class (and, rarely, a position
in it other than the head). The policy sees the scheduler's state through `SchedulerView` and
gets a seeded `random.Random`; it keeps no hidden state unless it documents it.

Add one in about twenty lines:

    @register("oldest_python_first")
    class OldestPythonFirst:
        def choose(self, candidates, view, rng):
            python = [c for c in candidates if c.runtime == "python"] or candidates
            return min(python, key=lambda c: c.head.seq), 0

and pick it by name in a workload or with `roost stress --policies oldest_python_first`.
See docs/scheduling.md.
"""

from __future__ import annotations

import collections
import dataclasses
import math
import random
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol

__all__ = [
    "POLICIES",
    "PendingClass",
    "PendingRollout",
    "SchedulerView",
    "SchedulingPolicy",
    "make_policy",
    "register",
]


@dataclasses.dataclass(eq=False, slots=True)
class PendingRollout:
    """A rollout waiting for dispatch. `seq` orders arrivals; `request` is the scheduler's."""

    seq: int
    enqueued_at: float
    request: Any
    attempts: int = 0


@dataclasses.dataclass(frozen=True, slots=True)
class ClassKey:
    group: str
    runtime: str
    tenant: str
    priority: int


class PendingClass:
    """The FIFO queue of pending rollouts that share group, runtime, tenant and priority."""

    __slots__ = ("items", "key")

    def __init__(self, key: ClassKey) -> None:
        self.key = key
        self.items: collections.deque[PendingRollout] = collections.deque()

    @property
    def head(self) -> PendingRollout:
        return self.items[0]

    @property
    def group(self) -> str:
        return self.key.group

    @property
    def runtime(self) -> str:
        return self.key.runtime

    @property
    def priority(self) -> int:
        return self.key.priority

    def __len__(self) -> int:
        return len(self.items)


class SchedulerView(Protocol):
    """What a policy may read of the scheduler (all of it cheap to call)."""

    @property
    def now(self) -> float: ...

    def warm(self, runtime: str) -> int:
        """Idle, warm sandboxes of `runtime` that a dispatch could take without a cold start."""
        ...

    def weight(self, group: str) -> float:
        """The group's configured share weight (1.0 unless set)."""
        ...

    def dispatched(self, group: str) -> int:
        """Rollouts of `group` dispatched so far (retries included)."""
        ...

    def expected_duration(self, group: str, runtime: str) -> float | None:
        """Moving average of this kind of rollout's run time, None before any finished."""
        ...


Pick = tuple[PendingClass, int]


class SchedulingPolicy(Protocol):
    """Choose among non-empty, dispatchable classes: the class and the index in it."""

    def choose(
        self, candidates: Sequence[PendingClass], view: SchedulerView, rng: random.Random
    ) -> Pick: ...


POLICIES: dict[str, Callable[..., SchedulingPolicy]] = {}


def register(name: str) -> Callable[[type], type]:
    """Class decorator: make a policy available by `name` (its options are keyword arguments)."""

    def add(cls: type) -> type:
        if name in POLICIES:
            raise ValueError(f"a scheduling policy named {name!r} is already registered")
        POLICIES[name] = cls
        return cls

    return add


def make_policy(name: str, options: Mapping[str, Any] | None = None) -> SchedulingPolicy:
    """The policy registered as `name`, built with `options`.

    :raises ValueError: unknown name (the message lists the known ones) or bad options.
    """
    try:
        factory = POLICIES[name]
    except KeyError:
        known = ", ".join(sorted(POLICIES))
        raise ValueError(f"unknown scheduling policy {name!r}; known: {known}") from None
    try:
        return factory(**dict(options or {}))
    except (TypeError, ValueError) as exc:
        # A constructor's own ValueError names the option; this names the policy too.
        raise ValueError(f"scheduling policy {name!r}: bad options: {exc}") from None


def _oldest(candidates: Sequence[PendingClass]) -> PendingClass:
    return min(candidates, key=lambda c: c.head.seq)


@register("fifo")
class Fifo:
    """First come, first served, across all classes."""

    def choose(
        self, candidates: Sequence[PendingClass], view: SchedulerView, rng: random.Random
    ) -> Pick:
        return _oldest(candidates), 0


@register("priority")
class Priority:
    """Highest priority first; waiting raises a rollout's priority by `aging_per_s` per second,
    so a low-priority rollout is served after at most (gap / aging_per_s) seconds of waiting."""

    def __init__(self, aging_per_s: float = 0.01) -> None:
        # NaN would make every effective priority NaN (max then picks by list order), and inf
        # gives inf * 0 = NaN for a head enqueued this instant.
        if not (math.isfinite(aging_per_s) and aging_per_s >= 0):
            raise ValueError(f"aging_per_s: must be finite and >= 0, got {aging_per_s}")
        self.aging_per_s = aging_per_s

    def choose(
        self, candidates: Sequence[PendingClass], view: SchedulerView, rng: random.Random
    ) -> Pick:
        now = view.now

        def effective(c: PendingClass) -> tuple[float, int]:
            waited = now - c.head.enqueued_at
            return (c.priority + self.aging_per_s * waited, -c.head.seq)

        return max(candidates, key=effective), 0


@register("fair_share")
class FairShare:
    """Serve the group furthest below its weighted share of dispatches (oldest first within).

    A group's standing is its dispatches per unit of weight (its virtual time). A group that
    had nothing queued at the previous choice (new, or back after an idle spell) starts at
    the least standing of the groups served meanwhile, as in start-time fair queueing: by raw
    counts since the start, a group arriving after a million dispatches would be served alone
    until it caught up, starving every other group. Idle time banks no credit.

    :raises ValueError: a candidate's group has a weight that is not finite and positive.
    """

    def __init__(self) -> None:
        self._offset: dict[str, float] = {}  # dispatches credited to a group lifted to the floor
        self._floor = 0.0  # the standing of the group served last (the least, by the rule)
        self._present: set[str] = set()

    def choose(
        self, candidates: Sequence[PendingClass], view: SchedulerView, rng: random.Random
    ) -> Pick:
        def standing(group: str) -> float:
            weight = view.weight(group)
            # 0 divided (ZeroDivisionError), a negative weight inverted the order, and NaN
            # made the choice depend on the candidates' order.
            if not (math.isfinite(weight) and weight > 0):
                raise ValueError(
                    f"fair_share: group {group!r} has weight {weight}; "
                    "weights must be finite and > 0"
                )
            return (view.dispatched(group) + self._offset.get(group, 0.0)) / weight

        groups = {c.group for c in candidates}
        for group in groups - self._present:
            behind = self._floor - standing(group)
            if behind > 0:
                self._offset[group] = self._offset.get(group, 0.0) + behind * view.weight(group)
        self._present = groups
        pick = min(candidates, key=lambda c: (standing(c.group), c.head.seq))
        self._floor = standing(pick.group)
        return pick, 0


@register("runtime_affinity")
class RuntimeAffinity:
    """Prefer rollouts whose runtime has a warm sandbox idle now (no cold start); else oldest."""

    def choose(
        self, candidates: Sequence[PendingClass], view: SchedulerView, rng: random.Random
    ) -> Pick:
        warm = [c for c in candidates if view.warm(c.runtime) > 0]
        return _oldest(warm or candidates), 0


@register("shortest_first")
class ShortestFirst:
    """Shortest expected run time first, learned per (group, runtime); unknown kinds go first,
    so every kind gets measured."""

    def choose(
        self, candidates: Sequence[PendingClass], view: SchedulerView, rng: random.Random
    ) -> Pick:
        def expected(c: PendingClass) -> tuple[float, int]:
            duration = view.expected_duration(c.group, c.runtime)
            return (-1.0 if duration is None else duration, c.head.seq)

        return min(candidates, key=expected), 0


@register("random")
class Random:
    """A uniformly random pending rollout among those dispatchable."""

    def choose(
        self, candidates: Sequence[PendingClass], view: SchedulerView, rng: random.Random
    ) -> Pick:
        total = sum(len(c) for c in candidates)
        position = rng.randrange(total)
        for c in candidates:
            if position < len(c):
                return c, position
            position -= len(c)
        raise AssertionError("unreachable: position within total")
