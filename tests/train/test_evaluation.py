"""Held-out evaluation: the sampled pass rate is the mean over `samples` draws per task."""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import Any

import pytest

from policies.neural import Sample
from policies.tokenizer import ByteTokenizer
from roost.train import evaluation
from sandboxes import SandboxSpec
from sandboxes._protocol import Sandbox
from sandboxes.pool import SandboxPool
from sandboxes.process import ProcessSandbox
from tasks import ProceduralTasks, Task, TestsVerifier, Verdict
from tests.conftest import REAL

pytestmark = [pytest.mark.anyio, pytest.mark.parametrize("anyio_backend", [REAL])]


async def _evaluate(
    tasks: Sequence[Task], *, max_turns: int, samples: int
) -> tuple[evaluation.HeldoutResult, dict[str, Any]]:
    """`evaluate_heldout` on real process sandboxes; level 1 is the demo level."""
    pool = SandboxPool(lambda key: ProcessSandbox(SandboxSpec(backend="process")), capacity=4)
    async with pool:
        return await evaluation.evaluate_heldout(
            None,  # type: ignore[arg-type]
            tasks,
            pool=pool,
            key=lambda task: "python",
            demo_levels=[1],
            max_turns=max_turns,
            max_new_tokens=64,
            prompt_room=400,
            temperature=1.0,
            concurrency=4,
            samples=samples,
        )


async def test_sampled_rate_is_the_mean_over_draws_and_greedy_is_one_draw(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    tasks = ProceduralTasks().take(1, 3) + ProceduralTasks().take(2, 3)
    tokenizer = ByteTokenizer()
    solution = {t.prompt: t.canonical_solution or "" for t in tasks}
    calls = itertools.count()

    def fake_generate(
        policy: Any, prompts: Sequence[Sequence[int]], *, temperature: float, **_: Any
    ) -> list[Sample]:
        """Greedy always solves; sampled solves one draw in four (tasks 0, 2, 4 two of their
        four draws each, the others none: a mean of 0.25, where "any draw" would say 0.5)."""
        out = []
        for ids in prompts:
            prompt = tokenizer.decode(list(ids[1:]))
            right = temperature == 0 or next(calls) % 4 == 0
            text = solution[prompt] if right else "    return None\n"
            out.append(Sample(tokenizer.encode(text, bos=False), [0.0], [0]))
        return out

    monkeypatch.setattr(evaluation, "generate", fake_generate)
    result, details = await _evaluate(tasks, max_turns=1, samples=4)
    assert result["all"] == {"greedy": 1.0, "sampled": 0.25}
    assert result["demo_levels"]["greedy"] == 1.0
    assert details["samples"] == 4
    # Three tasks at 2 of 4 draws, three at 0: sqrt(3 * 0.5 * 0.5 / 3) / 6.
    assert details["sampled_se"]["all"] == pytest.approx(0.5 / 6)
    # Level 1 (tasks 0, 1, 2: 0.5, 0, 0.5): sqrt(2 * 0.25 / 3) / 3.
    assert details["sampled_se"]["demo_levels"] == pytest.approx((0.5 / 3) ** 0.5 / 3)
    # 6 greedy generations (not counted) and 6 tasks x 4 sampled draws.
    assert next(calls) == 24


async def test_a_multi_turn_evaluation_also_reports_first_attempts(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    tasks = ProceduralTasks().take(1, 4)
    tokenizer = ByteTokenizer()
    solution = {t.prompt: t.canonical_solution or "" for t in tasks}
    first_right = {tasks[0].prompt}  # task 0 passes at once; 1 and 2 after a revision; 3 never
    revise_right = {tasks[1].prompt, tasks[2].prompt}

    def fake_generate(policy: Any, prompts: Sequence[Sequence[int]], **_: Any) -> list[Sample]:
        out = []
        for ids in prompts:
            prompt = tokenizer.decode(list(ids[1:]))
            task_prompt = next(p for p in solution if prompt.startswith(p))
            revising = "# tried:" in prompt
            right = task_prompt in (revise_right if revising else first_right)
            text = solution[task_prompt] if right else "    return None\n"
            out.append(Sample(tokenizer.encode(text, bos=False), [0.0], [0]))
        return out

    monkeypatch.setattr(evaluation, "generate", fake_generate)
    result, details = await _evaluate(tasks, max_turns=3, samples=2)
    assert result["all"] == {"greedy": 0.75, "sampled": 0.75}
    assert details["first_turn"]["all"] == {"greedy": 0.25, "sampled": 0.25}
    assert details["first_turn"]["test_only_levels"] == {"greedy": None, "sampled": None}
    assert details["first_turn_by_level"] == {"1": {"greedy": 0.25, "sampled": 0.25}}
    # Two draws a task, each task's draws alike: no sampling noise; no test-only tasks.
    assert details["sampled_se"] == {"all": 0.0, "demo_levels": 0.0, "test_only_levels": None}


async def test_draws_that_agree_run_once_and_a_timeout_runs_for_each_draw(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    tasks = ProceduralTasks().take(1, 3)
    tokenizer = ByteTokenizer()
    hangs = tasks[2].prompt
    answer = {t.prompt: t.canonical_solution or "" for t in tasks}
    answer[hangs] = "    while True: pass\n"
    runs: list[str] = []

    class CountingVerifier(TestsVerifier):
        async def verify(self, task: Task, text: str, sandbox: Sandbox) -> Verdict:
            runs.append(task.id)
            return await super().verify(task, text, sandbox)

    def same_answer(
        policy: Any, prompts: Sequence[Sequence[int]], *, temperature: float, **_: Any
    ) -> list[Sample]:
        texts = [answer[tokenizer.decode(list(ids[1:]))] for ids in prompts]
        return [Sample(tokenizer.encode(t, bos=False), [0.0], [0]) for t in texts]

    monkeypatch.setattr(evaluation, "generate", same_answer)
    monkeypatch.setattr(evaluation, "TestsVerifier", CountingVerifier)
    result, _ = await _evaluate(tasks, max_turns=1, samples=4)
    assert result["all"] == {"greedy": pytest.approx(2 / 3), "sampled": pytest.approx(2 / 3)}
    # Greedy: one run per task. Sampled: one per agreeing task, four for the one that times
    # out (a timeout depends on the machine, so it is never reused).
    expected = [t.id for t in tasks] + [tasks[0].id, tasks[1].id] + [tasks[2].id] * 4
    assert sorted(runs) == sorted(expected)
