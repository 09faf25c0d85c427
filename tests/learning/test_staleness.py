"""Bounded staleness holds whatever the timings: a seeded discrete-event model of the loop.

The model uses the real `StalenessBook` (admission, registration, the learner's step rule) and
the learner's real `split_stale` / `take_batch`; only time is simulated. Hypothesis draws the
episode durations, the learner's step time, k and the group shape.
"""

from __future__ import annotations

import dataclasses
import heapq

from hypothesis import given, settings
from hypothesis import strategies as st

from actors.learner import Trajectory, episode_of, episodes_in
from policies.staleness import StalenessBook, split_stale, take_batch


@dataclasses.dataclass(frozen=True)
class _Sample:
    rollout_id: str
    oldest_version: int


def _simulate(
    k: int,
    group_size: int,
    groups_per_step: int,
    durations: list[float],
    step_time: float,
    turns: list[int] | None = None,
    no_signal: frozenset[int] = frozenset(),
) -> tuple[dict[int, int], int, int, int]:
    """Staleness of every trained sample, samples dropped, the last version, episodes left.

    Rollout i yields `turns[i]` samples (`r<i>#<t>`, one per model turn; 1 when not given) and
    the learner counts episodes, as the real one does; a group whose index is in `no_signal`
    is settled unusable and never trained on (equal rewards).
    """
    batch = group_size * groups_per_step
    book = StalenessBook(k, batch)
    queue = [(f"g{i // group_size}", f"r{i}") for i in range(len(durations))]
    events: list[tuple[float, int, str, str]] = []
    seq = 0
    now = 0.0
    in_flight = 0
    learner_version = 0
    learner_busy_until: float | None = None
    groups: dict[str, list[_Sample]] = {}
    buffer: list[list[_Sample]] = []
    staleness: dict[int, int] = {}
    dropped_total = 0
    start_version: dict[str, int] = {}

    def admit() -> None:
        nonlocal in_flight, seq
        while queue and book.admits(in_flight):
            group, rid = queue.pop(0)
            in_flight += 1
            book.began(rid)
            start_version[rid] = book.version
            seq += 1
            heapq.heappush(events, (now + durations[int(rid[1:])], seq, "done", f"{group}|{rid}"))

    def try_step() -> None:
        nonlocal buffer, dropped_total, learner_busy_until, seq
        if learner_busy_until is not None:
            return
        buffer, dropped = split_stale(buffer, learner_version, k)
        dropped_total += dropped
        if sum(episodes_in(g) for g in buffer) < batch or not book.may_step(learner_version):
            return
        taken, buffer = take_batch(buffer, learner_version, k, batch, size=episodes_in)
        for group in taken:
            for sample in group:
                lag = learner_version - sample.oldest_version
                staleness[lag] = staleness.get(lag, 0) + 1
        learner_busy_until = now + step_time
        seq += 1
        heapq.heappush(events, (learner_busy_until, seq, "stepped", ""))

    admit()
    while events:
        now, _, kind, payload = heapq.heappop(events)
        if kind == "done":
            group, rid = payload.split("|")
            book.ended(rid)
            in_flight -= 1
            members = groups.setdefault(group, [])
            count = turns[int(rid[1:])] if turns else 1
            members.extend(_Sample(f"{rid}#{t}", start_version[rid]) for t in range(count))
            if len({episode_of(m.rollout_id) for m in members}) == group_size:
                usable = int(group[1:]) not in no_signal
                for rollout in {episode_of(m.rollout_id) for m in members}:
                    book.settled(rollout, usable=usable)
                if usable:
                    buffer.append(members)
                del groups[group]
        else:
            learner_version += 1
            book.version = learner_version  # the generator now serves it
            learner_busy_until = None
        try_step()
        admit()
    return staleness, dropped_total, learner_version, sum(episodes_in(g) for g in buffer)


def _draw_durations(data: st.DataObject, count: int) -> list[float]:
    """Episode durations, mostly short, some very long: the heavy tail makes stragglers."""
    return data.draw(
        st.lists(
            st.one_of(st.floats(0.0, 2.0), st.floats(20.0, 200.0)),
            min_size=count,
            max_size=count,
        ),
        label="durations",
    )


@settings(max_examples=40, deadline=None)
@given(
    k=st.integers(0, 4),
    group_size=st.integers(1, 4),
    groups_per_step=st.integers(1, 3),
    step_time=st.floats(0.0, 5.0),
    data=st.data(),
)
def test_no_sample_is_ever_trained_past_k(
    k: int, group_size: int, groups_per_step: int, step_time: float, data: st.DataObject
) -> None:
    count = group_size * groups_per_step * data.draw(st.integers(2, 5))
    durations = _draw_durations(data, count)
    staleness, dropped, _, left = _simulate(k, group_size, groups_per_step, durations, step_time)
    assert max(staleness, default=0) <= k
    assert dropped == 0
    # The bound never starves the learner: at the end, less than one batch is left untrained.
    assert sum(staleness.values()) + left == count
    assert left < group_size * groups_per_step


@settings(max_examples=40, deadline=None)
@given(
    k=st.integers(0, 2),
    group_size=st.integers(1, 4),
    groups_per_step=st.integers(1, 3),
    step_time=st.floats(0.0, 5.0),
    data=st.data(),
)
def test_multi_turn_episodes_keep_the_bound_with_the_plain_book(
    k: int, group_size: int, groups_per_step: int, step_time: float, data: st.DataObject
) -> None:
    # Episodes of one to three model turns, some groups without signal: the learner counts
    # episodes, as admission does, so a held batch counts as started, and even at k = 0 the
    # plain book (no TrainBook) keeps every trained sample within the bound.
    count = group_size * groups_per_step * data.draw(st.integers(2, 5))
    durations = _draw_durations(data, count)
    turns = data.draw(st.lists(st.integers(1, 3), min_size=count, max_size=count), label="turns")
    no_signal = frozenset(
        data.draw(st.sets(st.integers(0, count // group_size - 1), max_size=2), label="no_signal")
    )
    staleness, dropped, _, left = _simulate(
        k, group_size, groups_per_step, durations, step_time, turns, no_signal
    )
    assert max(staleness, default=0) <= k
    assert dropped == 0
    usable_samples = sum(t for i, t in enumerate(turns) if i // group_size not in no_signal)
    assert sum(staleness.values()) <= usable_samples
    assert left < group_size * groups_per_step  # never starved: less than a batch is left


def test_synchronous_bound_trains_only_fresh_samples() -> None:
    staleness, dropped, _, _ = _simulate(0, 2, 2, [1.0, 9.0, 2.0, 3.0] * 4, 0.5)
    assert staleness == {0: 16}
    assert dropped == 0


def test_admission_stops_at_k_plus_one_batches() -> None:
    book = StalenessBook(2, 4)
    admitted = 0
    while book.admits(admitted):
        admitted += 1
    assert admitted == 12
    book.version = 1
    assert book.admits(admitted)


def test_a_resumed_book_admits_k_plus_one_batches_not_every_earlier_one() -> None:
    book = StalenessBook(2, 4)
    book.resume_at(5)  # a learner restarted from its version-5 checkpoint
    admitted = 0
    while book.admits(admitted):
        admitted += 1
    assert admitted == 12
    assert book.version == 5


def test_a_running_straggler_holds_the_learner_back() -> None:
    book = StalenessBook(1, 2)
    book.began("slow")  # at version 0
    assert book.may_step(0)  # to version 1: staleness of "slow" would be 1 <= k
    assert not book.may_step(1)  # to version 2: it would be 2 > k
    book.settled("slow", usable=True)
    assert book.may_step(1)


def test_split_stale_drops_and_counts() -> None:
    groups = [[_Sample("a", 0), _Sample("b", 3)], [_Sample("c", 1)]]
    kept, dropped = split_stale(groups, 3, 2)
    assert dropped == 1
    assert [[s.rollout_id for s in g] for g in kept] == [["b"], ["c"]]


def _turns(episode: str, turns: int, version: int = 0) -> list[Trajectory]:
    return [
        Trajectory(f"{episode}#{t}", [1], [2], [-0.5], [version], reward=0.0) for t in range(turns)
    ]


def test_a_batch_counts_episodes_when_asked_not_model_turns() -> None:
    three_turns = _turns("g0/0", 3) + _turns("g0/1", 3)  # one group: 2 episodes, 6 samples
    one_turn = _turns("g1/0", 1) + _turns("g1/1", 1)
    assert episode_of("g0/0#2") == "g0/0"
    assert episode_of("g0/0") == "g0/0"
    assert episodes_in(three_turns) == 2

    by_samples, _ = take_batch([three_turns, one_turn], 0, 2, 4)
    by_episodes, rest = take_batch([three_turns, one_turn], 0, 2, 4, size=episodes_in)
    assert len(by_samples) == 1  # six samples already fill a batch of four
    assert len(by_episodes) == 2
    assert rest == []
