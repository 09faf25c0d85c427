"""Demonstrations of the revision turn: a wrong attempt, its failing test, then the solution.

An episode's later turns show the model its last attempt and the first failing test as two
comment lines (`revision_prompt`). Demonstrations of first turns alone never show that form,
and a model taught on them alone wrote nothing after it (in a default run, 1,000 of 1,016
revision turns were empty). So a share of the demonstrations is given in revision form: the
attempt is the canonical solution of another task of the same level (a plausible, wrong
function) and the feedback is what the tests verifier would report for it. Only the levels that
have demonstrations get them, so the test-only levels stay test-only.

The attempt runs in this process: only for procedural tasks, whose code (prompt and canonical
solutions) is generated here and trusted; a task file's code is never run outside a sandbox.
"""

from __future__ import annotations

import ast
import random
from collections.abc import Sequence

from roost.train.task_source import first_prompt, revision_prompt
from tasks import Task, Verdict

__all__ = ["revision_demos"]

DETAIL_CHARS = 100  # as the harness cuts a wrong value (tasks/_harness.py)
ERROR_CHARS = 300  # and an exception's message


def first_failure(task: Task, attempt: str) -> str | None:
    """The verifier's reason for `attempt` on `task` (its first failing test), or None when the
    attempt passes every test. `task` must be trusted: the attempt runs in this process."""
    namespace: dict[str, object] = {}
    try:
        exec(compile(task.prefix + attempt, "solution.py", "exec"), namespace)
    except Exception:
        return None  # the verifier would report a load error; such demos are not needed
    for i, test in enumerate(task.tests):
        name = test.name or f"test_{i}"
        if not test.call:
            return None
        try:
            got = eval(test.call, namespace)
        except Exception as exc:
            return f"{name}: error {type(exc).__name__}: {str(exc)[:ERROR_CHARS]}"
        if got != ast.literal_eval(test.expected):
            return f"{name}: failed {test.call} = {repr(got)[:DETAIL_CHARS]}"
    return None


def revision_demos(tasks: Sequence[Task], share: float, *, seed: int = 0) -> list[tuple[str, str]]:
    """(prompt, canonical solution) pairs for `tasks`: a `share` of them in revision form (the
    prompt carries a wrong attempt and its failing test), the rest as first turns."""
    rng = random.Random(f"revision-demos:{seed}")
    by_level: dict[int, list[Task]] = {}
    for task in tasks:
        by_level.setdefault(task.level, []).append(task)
    pairs: list[tuple[str, str]] = []
    for task in tasks:
        if not task.canonical_solution:
            continue
        prompt = first_prompt(task)
        peers = by_level[task.level]
        if len(peers) > 1 and rng.random() < share:
            attempt = peers[rng.randrange(len(peers))].canonical_solution or ""
            reason = first_failure(task, attempt) if attempt else None
            if reason is not None:
                verdict = Verdict(passed=False, score=0.0, failure="agent", reason=reason)
                prompt = revision_prompt(task, attempt, verdict)
        pairs.append((prompt, task.canonical_solution))
    return pairs
