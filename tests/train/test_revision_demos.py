"""Revision demonstrations: the feedback they show is what the tests verifier really reports."""

from __future__ import annotations

import pytest

from roost.train.config import TasksConfig
from roost.train.revision_demos import first_failure, revision_demos
from roost.train.task_source import TaskSource
from tasks import ProceduralTasks, TestsVerifier
from tests.conftest import REAL
from tests.tasks._helpers import real_sandbox

pytestmark = pytest.mark.anyio


@pytest.mark.parametrize("anyio_backend", [REAL])
async def test_the_feedback_is_the_verifiers_own_reason() -> None:
    tasks = ProceduralTasks(seed=3)
    checked = 0
    async with real_sandbox() as sandbox:
        for level in (1, 2):
            for task, other in zip(
                tasks.take(level, 6), tasks.take(level, 6, start=50), strict=True
            ):
                attempt = other.canonical_solution or ""
                reason = first_failure(task, attempt)
                verdict = await TestsVerifier().verify(task, attempt, sandbox)
                if verdict.passed:
                    assert reason is None
                    continue
                assert reason == verdict.reason, (task.id, attempt)
                checked += 1
        # A division by zero is reported as the harness reports an exception.
        task = tasks.take(1, 1)[0]
        crashing = "    return x // 0\n"
        verdict = await TestsVerifier().verify(task, crashing, sandbox)
        assert first_failure(task, crashing) == verdict.reason
    assert checked >= 8
    assert first_failure(task, task.canonical_solution or "") is None


def test_a_share_of_demos_is_in_revision_form_and_only_at_demo_levels() -> None:
    tasks = [t for level in (1, 2) for t in ProceduralTasks().take(level, 200)]
    none = revision_demos(tasks, 0.0)
    assert all("# tried:" not in prompt for prompt, _ in none)
    some = revision_demos(tasks, 0.5, seed=1)
    revised = [prompt for prompt, _ in some if "# tried:" in prompt]
    assert 0.3 * len(tasks) < len(revised) < 0.6 * len(tasks)
    assert all("    # failed: test_" in prompt for prompt in revised)
    # Every pair still ends in the task's own canonical solution.
    assert [solution for _, solution in some] == [t.canonical_solution for t in tasks]
    assert revision_demos(tasks, 0.5, seed=1) == some  # deterministic

    config = TasksConfig(levels=[1, 2, 3], demo_levels=[1], demos_per_level=50)
    demos = TaskSource(config).demos()
    assert len(demos) == 50
    assert all("return" in solution for _, solution in demos)


def test_a_bad_share_is_refused() -> None:
    with pytest.raises(ValueError, match="revision_demos"):
        TasksConfig(revision_demos=1.5)


def test_the_demonstrations_are_made_once_and_each_caller_gets_its_own_list(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import roost.train.revision_demos as module

    calls = []
    real = module.revision_demos

    def counted(*args: object, **kwargs: object) -> list[tuple[str, str]]:
        calls.append(1)
        return real(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(module, "revision_demos", counted)
    source = TaskSource(TasksConfig(levels=[1, 2], demo_levels=[1], demos_per_level=20))
    first = source.demos()
    first.clear()  # one caller's list is its own
    second = source.demos()
    assert len(second) == 20
    assert second == source.demos()
    assert len(calls) == 1
