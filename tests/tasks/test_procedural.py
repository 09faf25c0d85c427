"""The procedural task set: deterministic, unbounded, split by function, short, and sound."""

from __future__ import annotations

import collections
import itertools

import pytest

import tasks
from tasks import MAX_LEVEL, ProceduralTasks, Task, canary_tasks, check_tasks, mutants
from tasks._chain_ast import parse_chain
from tasks.procedural import ProceduralTasks as Direct
from tasks.procedural import SolutionStyle
from tests.conftest import REAL
from tests.tasks._pool import process_pool


def test_the_same_seed_gives_the_same_tasks_and_another_seed_others() -> None:
    a, b, c = ProceduralTasks(seed=3), ProceduralTasks(seed=3), ProceduralTasks(seed=4)
    for level in range(1, MAX_LEVEL + 1):
        assert a.take(level, 5) == b.take(level, 5)
        assert a.take(level, 5) != c.take(level, 5)
    assert Direct is ProceduralTasks


def test_every_level_has_short_tasks_with_hidden_tests() -> None:
    source = ProceduralTasks()
    for level in range(1, MAX_LEVEL + 1):
        for task in source.take(level, 20):
            assert task.level == level
            assert task.group == f"level-{level}"
            assert task.canonical_solution is not None
            assert len(task.canonical_solution) < 90
            assert len(task.tests) == 8
            for test in task.tests:  # hidden: not among the examples in the prompt
                assert f"{test.call} ==" not in task.prompt
    first = source.task(1, 0)
    assert len(first.prompt) < 100


def test_the_supply_is_unbounded_and_fresh() -> None:
    stream = ProceduralTasks().stream(1)
    ids = [t.id for t in itertools.islice(stream, 2000)]
    assert len(set(ids)) == 2000


def test_held_out_functions_never_reach_training() -> None:
    source = ProceduralTasks(heldout_percent=10)
    for level in range(1, MAX_LEVEL + 1):
        train = {t.id.split("-")[2] for t in source.take(level, 300)}
        heldout = source.take(level, 30, split="heldout")
        assert {t.id.split("-")[2] for t in heldout}.isdisjoint(train)
        assert all(source.split_of(t) == "heldout" for t in heldout)


def test_a_held_out_set_spreads_over_functions_not_draws() -> None:
    source = ProceduralTasks()

    def function(task: Task) -> str:
        return task.id.split("-")[2]

    # The plain stream is dominated by a function with no constant (x ** 2 at level 1)...
    drawn = collections.Counter(map(function, source.take(1, 30, split="heldout")))
    assert drawn.most_common(1)[0][1] >= 20
    # ...the spread set takes every function it finds once before any twice.
    spread = source.take_by_function(1, 30, split="heldout")
    counts = collections.Counter(map(function, spread))
    assert len(spread) == 30
    assert len(counts) > len(drawn)
    assert max(counts.values()) - min(counts.values()) <= 1
    assert set(drawn) <= set(counts)
    assert all(source.split_of(t) == "heldout" for t in spread)
    assert len({t.id for t in spread}) == 30  # a repeated function comes with fresh examples
    # Where the level has enough functions, each task is a different one.
    assert len(set(map(function, source.take_by_function(3, 30, split="heldout")))) == 30


@pytest.mark.timeout(30)  # the bug was an endless loop: fail, don't hang the suite
def test_a_split_that_leaves_a_level_no_held_out_function_is_an_error_not_a_hang() -> None:
    # No level-1 function has digest % 100 below 1, at any seed: the held-out side is empty.
    source = ProceduralTasks(heldout_percent=1)
    empty = r"heldout_percent: at 1, level 1 has no held-out function .*; raise heldout_percent"
    with pytest.raises(ValueError, match=empty):
        source.take_by_function(1, 30, split="heldout")
    with pytest.raises(ValueError, match=empty):
        next(source.stream(1, split="heldout", start=500))
    # A side that is small but not empty still streams: level 2 holds out about 1 % of its
    # functions, and level 1's training side at 99 % is one function (`x + 2`).
    assert all(source.split_of(t) == "heldout" for t in source.take(2, 3, split="heldout"))
    narrow = ProceduralTasks(heldout_percent=99)
    assert {t.canonical_solution for t in narrow.take(1, 3)} == {"    return x + 2\n"}


def test_bad_levels_are_refused() -> None:
    with pytest.raises(ValueError, match="level"):
        ProceduralTasks().task(MAX_LEVEL + 1, 0)
    with pytest.raises(ValueError, match="max_level"):
        ProceduralTasks(max_level=0)


def test_every_task_has_mutants() -> None:
    for level in range(1, MAX_LEVEL + 1):
        for task in ProceduralTasks().take(level, 10):
            kinds = [m.kind for m in mutants(task)]
            assert "empty_body" in kinds
            assert len(kinds) >= 2


@pytest.mark.anyio
@pytest.mark.parametrize("anyio_backend", [REAL])
@pytest.mark.parametrize("style", ["expression", "steps", "annotated"])
async def test_canonical_solutions_pass_and_mutants_fail_in_a_real_sandbox(
    style: SolutionStyle,
) -> None:
    source = ProceduralTasks(seed=11, solution_style=style)
    sample = [task for level in range(1, MAX_LEVEL + 1) for task in source.take(level, 2)]
    async with process_pool(2) as pool:
        report = (await check_tasks(sample, pool, workers=2, repeats=1)).to_json()
    assert report["canonical_passed"] == len(sample)
    assert not report["invalid"]
    assert report["mutant_kill_rate"] >= 0.9


def test_the_steps_style_writes_one_line_per_operation_and_changes_nothing_else() -> None:
    nested, steps = ProceduralTasks(seed=5), ProceduralTasks(seed=5, solution_style="steps")
    for level in range(1, MAX_LEVEL + 1):
        for a, b in zip(nested.take(level, 10), steps.take(level, 10), strict=True):
            assert (a.id, a.prompt, a.tests) == (b.id, b.prompt, b.tests)
            assert b.canonical_solution is not None
            lines = b.canonical_solution.splitlines()
            if level <= 4:  # a chain: `level` assignments, then the return
                assert len(lines) == level + 1
                assert all(line.startswith("    x = ") for line in lines[:-1])
                assert lines[-1] == "    return x"
            else:
                assert b.canonical_solution == a.canonical_solution
    with pytest.raises(ValueError, match="solution_style: must be one of expression, steps"):
        ProceduralTasks(solution_style="lines")  # type: ignore[arg-type]


def test_the_annotated_style_quotes_each_clause_of_the_prompt_above_its_line() -> None:
    nested = ProceduralTasks(seed=5, max_level=MAX_LEVEL)
    annotated = ProceduralTasks(seed=5, max_level=MAX_LEVEL, solution_style="annotated")
    for level in range(1, MAX_LEVEL + 1):
        for a, b in zip(nested.take(level, 10), annotated.take(level, 10), strict=True):
            assert (a.id, a.prompt, a.tests) == (b.id, b.prompt, b.tests)
            assert a.canonical_solution is not None
            assert b.canonical_solution is not None
            if level > 4:  # not a chain: written as before
                assert b.canonical_solution == a.canonical_solution
                continue
            lines = b.canonical_solution.splitlines()
            comments, code = lines[0:-1:2], lines[1:-1:2]
            assert len(comments) == len(code) == level
            assert lines[-1] == "    return x"
            assert all(line.startswith("    x = ") for line in code)
            # Put together, the comments are the description exactly as the prompt has it.
            said = " ".join(line.removeprefix("    # ") for line in comments)
            assert f'"""{said} f(' in b.prompt, (said, b.prompt)
            assert [line.endswith(",") for line in comments] == [True] * (level - 1) + [False]
            assert parse_chain(b.canonical_solution) == parse_chain(a.canonical_solution)


def test_canaries_cover_different_levels_first() -> None:
    source = ProceduralTasks()
    pool = [t for level in (1, 1, 2, 3) for t in source.take(level, 2)]
    chosen = canary_tasks(pool, 3)
    assert [t.level for t in chosen] == [1, 2, 3]


def test_the_public_names_all_import() -> None:
    assert sorted(tasks.__all__) == sorted(set(tasks.__all__))
    for name in tasks.__all__:
        assert getattr(tasks, name) is not None


def test_a_task_id_gives_back_its_index_in_the_stream() -> None:
    source = ProceduralTasks(seed=3, max_level=4)
    for level in range(1, 5):
        for index in (0, 7, 123):
            task = source.task(level, index)
            assert ProceduralTasks.stream_index(task.id) == index
            assert source.task(level, index).id == task.id
    solved = source.task_solved_by("    return (x + 3) * 2\n")
    assert solved is not None
    assert ProceduralTasks.stream_index(solved.id) is None  # read off a program: no index
    assert ProceduralTasks.stream_index("humaneval/12") is None
