"""`ReusingVerifier`: one run per distinct (tests, program), repeats get its verdict."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator

import anyio
import msgspec
import pytest

from sandboxes._protocol import Sandbox
from tasks import (
    ReusingVerifier,
    Task,
    TestCase,
    TestOutcome,
    TestStatus,
    TestsVerifier,
    Verdict,
)
from tasks._reuse import reusable
from tests.conftest import REAL
from tests.tasks._helpers import ADD_ONE, FakeSandbox, real_sandbox

pytestmark = pytest.mark.anyio

SANDBOX = FakeSandbox()


def _judged(task: Task, *statuses: TestStatus) -> Verdict:
    assert len(statuses) == len(task.tests)
    tests = [TestOutcome(name=f"t{i}", status=s) for i, s in enumerate(statuses)]
    ok = all(s == "passed" for s in statuses)
    score = sum(s == "passed" for s in statuses) / len(statuses)
    return Verdict(passed=ok, score=score, tests=tests, failure=None if ok else "agent")


class ScriptedVerifier:
    """Answers from `verdicts` by program text, counting the runs; `gate` holds every run."""

    def __init__(self, verdicts: dict[str, Verdict], gate: anyio.Event | None = None) -> None:
        self.verdicts = verdicts
        self.gate = gate
        self.runs: list[str] = []

    async def verify(self, task: Task, text: str, sandbox: Sandbox) -> Verdict:
        self.runs.append(text)
        if self.gate is not None:
            await self.gate.wait()
        return self.verdicts[text]


async def test_a_repeated_program_runs_once_and_its_repeats_are_marked_reused() -> None:
    right = _judged(ADD_ONE, "passed", "passed", "passed")
    wrong = _judged(ADD_ONE, "passed", "failed", "error")
    inner = ScriptedVerifier({"right": right, "wrong": wrong})
    verifier = ReusingVerifier(inner)
    first = [await verifier.verify(ADD_ONE, text, SANDBOX) for text in ("right", "wrong")]
    again = [await verifier.verify(ADD_ONE, text, SANDBOX) for text in ("wrong", "right")]
    assert inner.runs == ["right", "wrong"]
    assert first == [right, wrong]
    assert not any(v.reused for v in first)
    assert again == [
        msgspec.structs.replace(wrong, reused=True),
        msgspec.structs.replace(right, reused=True),
    ]
    assert (verifier.runs, verifier.reused) == (2, 2)


@contextlib.asynccontextmanager
async def _at_once(
    verifier: ReusingVerifier, text: str, count: int
) -> AsyncIterator[list[Verdict]]:
    """`count` verifications of `text` started together; the block runs once all of them
    are blocked, and the verdicts are in the list when it ends (within 5 s)."""
    got: list[Verdict] = []

    async def one() -> None:
        got.append(await verifier.verify(ADD_ONE, text, SANDBOX))

    with anyio.fail_after(5):
        async with anyio.create_task_group() as group:
            for _ in range(count):
                group.start_soon(one)
            await anyio.wait_all_tasks_blocked()
            yield got


async def test_repeats_that_arrive_during_the_run_wait_for_it() -> None:
    gate = anyio.Event()
    inner = ScriptedVerifier({"right": _judged(ADD_ONE, "passed", "passed", "passed")}, gate)
    verifier = ReusingVerifier(inner)
    async with _at_once(verifier, "right", 8) as got:
        assert inner.runs == ["right"]  # seven wait on the first run
        gate.set()
    assert len(got) == 8
    assert all(v.passed for v in got)
    assert sum(v.reused for v in got) == 7


@pytest.mark.parametrize(
    "verdict",
    [
        _judged(ADD_ONE, "passed", "passed", "timeout"),
        _judged(ADD_ONE, "passed", "crash", "failed"),
        Verdict.infrastructure("the sandbox died"),
        Verdict.evaluation("harness verdict is garbage"),
        Verdict(passed=False, score=0.0, failure="agent", reason="harness timed out"),
    ],
    ids=["timeout", "crash", "infrastructure", "evaluation", "harness-killed"],
)
async def test_outcomes_that_depend_on_the_machine_are_run_again(verdict: Verdict) -> None:
    inner = ScriptedVerifier({"slow": verdict})
    verifier = ReusingVerifier(inner)
    for _ in range(3):
        assert await verifier.verify(ADD_ONE, "slow", SANDBOX) == verdict
    assert inner.runs == ["slow"] * 3
    assert verifier.reused == 0


async def test_a_cancelled_first_run_leaves_its_repeat_to_run_for_itself() -> None:
    gate = anyio.Event()
    inner = ScriptedVerifier({"right": _judged(ADD_ONE, "passed", "passed", "passed")}, gate)
    verifier = ReusingVerifier(inner)
    first = anyio.CancelScope()
    got: list[Verdict] = []

    async def leader() -> None:
        with first:
            await verifier.verify(ADD_ONE, "right", SANDBOX)

    async def repeat() -> None:
        got.append(await verifier.verify(ADD_ONE, "right", SANDBOX))

    with anyio.fail_after(5):
        async with anyio.create_task_group() as group:
            group.start_soon(leader)
            await anyio.wait_all_tasks_blocked()
            group.start_soon(repeat)
            await anyio.wait_all_tasks_blocked()
            assert inner.runs == ["right"]
            first.cancel()
            await anyio.wait_all_tasks_blocked()
            assert inner.runs == ["right", "right"]  # the repeat's own run
            gate.set()
    assert len(got) == 1
    assert got[0].passed
    assert not got[0].reused


async def test_other_tests_under_the_same_id_are_another_run() -> None:
    inner = ScriptedVerifier({"right": _judged(ADD_ONE, "passed", "passed", "passed")})
    verifier = ReusingVerifier(inner)
    changed = msgspec.structs.replace(
        ADD_ONE, tests=[*ADD_ONE.tests[:2], TestCase(call="f(7)", expected="8")]
    )
    await verifier.verify(ADD_ONE, "right", SANDBOX)
    await verifier.verify(changed, "right", SANDBOX)
    assert inner.runs == ["right", "right"]


async def test_the_oldest_verdict_is_dropped_beyond_capacity() -> None:
    verdicts = {t: _judged(ADD_ONE, "passed", "passed", "passed") for t in "abc"}
    inner = ScriptedVerifier(verdicts)
    verifier = ReusingVerifier(inner, capacity=2)
    for text in "abca":
        await verifier.verify(ADD_ONE, text, SANDBOX)
    assert inner.runs == ["a", "b", "c", "a"]
    with pytest.raises(ValueError, match="capacity"):
        ReusingVerifier(inner, capacity=0)


@pytest.mark.parametrize("anyio_backend", [REAL])
async def test_a_real_verdict_is_reused_for_the_same_program_only() -> None:
    verifier = ReusingVerifier(TestsVerifier())
    async with real_sandbox() as sandbox:
        right = await verifier.verify(ADD_ONE, "    return x + 1\n", sandbox)
        wrong = await verifier.verify(ADD_ONE, "    return x\n", sandbox)
        repeat = await verifier.verify(ADD_ONE, "    return x + 1\n", sandbox)
    assert right.passed
    assert not right.reused
    assert not wrong.passed
    assert wrong.failure == "agent"
    assert repeat.passed
    assert repeat.reused
    assert repeat.tests == right.tests
    assert (verifier.runs, verifier.reused) == (2, 1)


async def test_repeats_of_a_run_that_timed_out_run_side_by_side() -> None:
    timed_out = _judged(ADD_ONE, "passed", "timeout", "timeout")
    first_gate, repeats_gate = anyio.Event(), anyio.Event()
    runs: list[anyio.Event] = []

    class Inner:
        async def verify(self, task: Task, text: str, sandbox: Sandbox) -> Verdict:
            gate = first_gate if not runs else repeats_gate
            runs.append(gate)
            await gate.wait()
            return timed_out

    verifier = ReusingVerifier(Inner())
    async with _at_once(verifier, "slow", 4) as got:
        assert len(runs) == 1  # three repeats wait for the first run
        first_gate.set()
        await anyio.wait_all_tasks_blocked()
        # Its verdict depends on the machine: the three repeats now run, all at once.
        assert runs == [first_gate] + [repeats_gate] * 3
        repeats_gate.set()
    assert got == [timed_out] * 4
    assert verifier.reused == 0


@pytest.mark.parametrize("anyio_backend", [REAL])
async def test_a_load_that_timed_out_or_died_is_run_again_but_one_that_raised_is_reused() -> None:
    # The shortest limits: the harness waits timeout_s + 5 s for the program to load.
    quick = msgspec.structs.replace(ADD_ONE, timeout_s=0.1)
    right = "    return x + 1\n"
    slow = right + "import time\ntime.sleep(60)\n"  # a right program, slow to start
    died = right + "import os\nos._exit(3)\n"
    raised = right + "raise ImportError('no such module')\n"
    verifier = ReusingVerifier(TestsVerifier())
    async with real_sandbox() as sandbox:
        verdicts = {text: await verifier.verify(quick, text, sandbox) for text in (slow, died)}
        for text in (died, raised, raised):
            verdicts[text] = await verifier.verify(quick, text, sandbox)
    assert [t.status for t in verdicts[slow].tests] == ["timeout"] * 3, verdicts[slow]
    assert "did not load within 5.1s" in verdicts[slow].reason
    assert not reusable(quick, verdicts[slow])
    assert [t.status for t in verdicts[died].tests] == ["crash"] * 3, verdicts[died]
    assert not verdicts[died].reused  # its repeat ran for itself
    assert [t.status for t in verdicts[raised].tests] == ["error"] * 3, verdicts[raised]
    assert "ImportError: no such module" in verdicts[raised].reason
    assert verdicts[raised].reused  # the program's own failure: its repeat got the verdict
    assert (verifier.runs, verifier.reused) == (4, 1)
