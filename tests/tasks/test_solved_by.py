"""Hindsight tasks: the chain task a function body answers, read off its syntax tree."""

from __future__ import annotations

import warnings

import pytest

from tasks import ProceduralTasks, Task, TestsVerifier
from tasks._chain_ast import parse_chain
from tests.conftest import REAL
from tests.tasks._helpers import real_sandbox


def _digest(task: Task) -> str:
    return task.id.split("-")[2]


def _passes_in_process(task: Task, body: str) -> bool:
    """Whether `body` passes `task`'s tests, run here (test bodies only: written above)."""
    namespace: dict[str, object] = {}
    exec(task.prefix + body, namespace)
    return all(eval(t.call, namespace) == eval(t.expected) for t in task.tests)


def test_every_chain_solution_reads_back_as_its_own_function() -> None:
    source = ProceduralTasks(seed=0, max_level=4)
    for level in range(1, 5):
        for index in range(150):
            task = source.task(level, index)
            solved = source.task_solved_by(task.canonical_solution)
            assert solved is not None, task.canonical_solution
            # The same function (digest), level and split; its own examples and tests.
            assert (_digest(solved), solved.level) == (_digest(task), level)
            assert source.split_of(solved) == source.split_of(task)
            assert solved.prompt.split(".")[0] == task.prompt.split(".")[0]  # the words
            assert solved.id.endswith("-solved")


def test_a_steps_solution_reads_back_as_the_same_function() -> None:
    # `tasks.solution_style = "steps"` writes one assignment per operation: a program in
    # that form is read as the chain its lines compute, in order.
    steps = ProceduralTasks(seed=0, max_level=4, solution_style="steps")
    nested = ProceduralTasks(seed=0, max_level=4)
    for level in range(1, 5):
        for index in range(60):
            task = steps.task(level, index)
            assert task.canonical_solution.count(" = ") == level
            assert parse_chain(task.canonical_solution) == parse_chain(
                nested.task(level, index).canonical_solution
            )
            solved = steps.task_solved_by(task.canonical_solution)
            assert solved is not None
            assert _digest(solved) == _digest(task)


@pytest.mark.parametrize(
    ("body", "chain"),
    [
        ("    return max(x * 3, 2) - 7\n", [("mul", 3), ("max", 2), ("sub", 7)]),
        ("    return -x ** 2\n", [("square", 2), ("neg", 0)]),  # Python's precedence
        ("    return (-x) ** 2\n", [("neg", 0), ("square", 2)]),
        ("    return min(-3, abs(x % 5))\n", [("mod", 5), ("abs", 0), ("min", -3)]),
        ("    return ((x + 4) // 3)\n", [("add", 4), ("div", 3)]),
        ("return x\n", []),
        (
            "    x = x * 3\n    x = max(x, 2)\n    return x - 7\n",
            [("mul", 3), ("max", 2), ("sub", 7)],
        ),
        ("    x = abs(x % 5)\n    return x\n", [("mod", 5), ("abs", 0)]),
        ("    # a comment\n    x = -x\n    return x\n", [("neg", 0)]),
    ],
)
def test_a_body_is_read_as_the_chain_it_computes(body: str, chain: list[tuple[str, int]]) -> None:
    assert parse_chain(body) == chain


@pytest.mark.parametrize(
    "body",
    [
        "    return max(x * 3, 2) - 7\n",
        "    return -x ** 2 + 5\n",
        "    return min(4, abs(x - 9)) * 2\n",
        "    return (x % 7 + 3) * 11\n",
        "    return -max(x, -2) + 5\n",
    ],
)
def test_the_task_read_off_a_body_is_one_that_body_passes(body: str) -> None:
    task = ProceduralTasks(seed=0, max_level=4).task_solved_by(body)
    assert task is not None
    assert task.level == len(parse_chain(body) or [])
    assert _passes_in_process(task, body)
    assert not _passes_in_process(task, "    return x + 1\n")  # the tests do tell apart


@pytest.mark.parametrize(
    "body",
    [
        "    y = x + 1\n    return y\n",  # another name assigned
        "    x = x + 1\n",  # no return
        "    x = x + 1\n    return x\n    return x\n",  # a statement after the return
        "    x += 1\n    return x\n",  # not a plain assignment
        "    x = y = x + 1\n    return x\n",
        "    x = x + x\n    return x\n",  # the variable twice
        "    print(x)\n    return x\n",
        "    return y + 1\n",  # another name
        "    return x + 1.5\n",  # not an integer
        "    return x + True\n",
        "    return x ** 3\n",  # no words for a cube
        "    return max(x, 3, 4)\n",
        "    return max(x, key=abs)\n",
        "    return round(x)\n",
        "    return x + (x * 2)\n",  # the variable twice
        "    return x +\n",  # a syntax error
        "    return x\x00\n",
        "    return\n",
    ],
)
def test_a_body_outside_the_grammar_is_not_read(body: str) -> None:
    assert parse_chain(body) is None
    assert ProceduralTasks(seed=0, max_level=4).task_solved_by(body) is None


@pytest.mark.parametrize(
    "body",
    [
        "    return x * 1 + 3\n",  # a constant the generator never draws
        "    return max(x, 9) + 2\n",
        "    return x + 2 + 3 + 4 + 5 + 6\n",  # five operations
        "    return x\n",  # none
        "    return min(4, x // 3) - 2\n",  # its tests could not tell min 4 from min 5
    ],
)
def test_a_chain_the_generator_could_not_draw_has_no_task(body: str) -> None:
    assert ProceduralTasks(seed=0, max_level=4).task_solved_by(body) is None


def test_a_task_is_only_read_up_to_the_sources_top_level() -> None:
    body = "    return (x + 3) * 2 - 5\n"
    assert ProceduralTasks(seed=0, max_level=2).task_solved_by(body) is None
    assert ProceduralTasks(seed=0, max_level=3).task_solved_by(body) is not None


@pytest.mark.anyio
@pytest.mark.parametrize("anyio_backend", [REAL])
async def test_the_read_task_passes_in_a_real_sandbox_where_the_asked_one_failed() -> None:
    source = ProceduralTasks(seed=0, max_level=3)
    asked = next(t for t in source.stream(3) if "abs" not in t.canonical_solution)
    wrong = "    return abs(x * 2) + 5\n"  # an answer to something else
    solved = source.task_solved_by(wrong)
    assert solved is not None
    verifier = TestsVerifier()
    async with real_sandbox() as sandbox:
        assert not (await verifier.verify(asked, wrong, sandbox)).passed
        assert (await verifier.verify(solved, wrong, sandbox)).passed


def test_reading_odd_python_raises_no_warning_for_the_caller() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a SyntaxWarning would now be an exception
        assert parse_chain("    return 1if x else 2\n") is None
        assert parse_chain("    return 0x1for\n") is None
