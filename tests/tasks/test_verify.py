"""Every failure kind of a verdict, constructed for real (bubblewrap) or with a fake sandbox."""

from __future__ import annotations

import msgspec
import pytest

from sandboxes._errors import SandboxBrokenError
from sandboxes._spec import ExecResult
from tasks import TestCase, TestsVerifier, Verdict
from tests.conftest import REAL
from tests.tasks._helpers import ADD_ONE, FakeSandbox, real_sandbox

pytestmark = pytest.mark.anyio
real = pytest.mark.parametrize("anyio_backend", [REAL])


@real
async def test_agent_outcomes_are_classified_per_test() -> None:
    verifier = TestsVerifier()
    slow = msgspec.structs.replace(ADD_ONE, timeout_s=0.3)
    cases = {
        "    return x + 1\n": (True, None, {"passed"}),
        "    return x\n": (False, "agent", {"failed"}),
        "    return x + 1 if x > 0 else 0\n": (False, "agent", {"passed", "failed"}),
        "    while True: pass\n": (False, "agent", {"timeout"}),
        "    import os; os._exit(3)\n": (False, "agent", {"crash"}),
        "    raise ValueError('no')\n": (False, "agent", {"error"}),
        "    return (\n": (False, "agent", {"error"}),  # a syntax error
        "    return object()\n": (False, "agent", {"failed"}),  # not a plain value
    }
    async with real_sandbox() as sandbox:
        for text, (passed, failure, statuses) in cases.items():
            verdict = await verifier.verify(slow, text, sandbox)
            assert verdict.passed is passed, (text, verdict)
            assert verdict.failure == failure, (text, verdict)
            assert {t.status for t in verdict.tests} == statuses, (text, verdict)
    partial = await _one("    return x + 1 if x > 0 else 0\n")
    assert partial.score == pytest.approx(2 / 3)


async def _one(text: str) -> Verdict:
    async with real_sandbox() as sandbox:
        return await TestsVerifier().verify(ADD_ONE, text, sandbox)


@real
async def test_a_solution_that_kills_the_harness_is_the_agents_failure() -> None:
    verdict = await _one("    return 0\nimport os, signal\nos.kill(os.getppid(), signal.SIGKILL)\n")
    assert verdict.failure == "agent"
    assert "signal 9" in verdict.reason


async def test_a_failed_exec_is_an_infrastructure_failure() -> None:
    verdict = await TestsVerifier().verify(ADD_ONE, "    return x + 1\n", FakeSandbox())
    assert verdict.failure == "infrastructure"
    assert verdict.score == 0.0
    assert not verdict.passed


async def test_a_sandbox_that_cannot_take_files_is_an_infrastructure_failure() -> None:
    task = msgspec.structs.replace(ADD_ONE, files={"data.txt": "1"})
    verdict = await TestsVerifier().verify(task, "x", FakeSandbox(broken_files=True))
    assert verdict.failure == "infrastructure"
    assert "lost the container" in verdict.reason


async def test_a_sandbox_that_never_answers_is_an_infrastructure_failure() -> None:
    verdict = await TestsVerifier().verify(ADD_ONE, "x", FakeSandbox(hang=True))
    assert verdict.failure == "infrastructure"
    assert "deadline" in verdict.reason


async def test_a_harness_killed_by_the_sandbox_timeout_is_the_agents_failure() -> None:
    timed_out = ExecResult(exit_code=None, timed_out=True, signal=9)
    verdict = await TestsVerifier().verify(ADD_ONE, "x", FakeSandbox(exec_result=timed_out))
    assert verdict.failure == "agent"


async def test_a_harness_that_says_nothing_is_an_evaluation_failure() -> None:
    quiet = ExecResult(exit_code=1, stderr=b"Traceback: harness bug")
    verdict = await TestsVerifier().verify(ADD_ONE, "x", FakeSandbox(exec_result=quiet))
    assert verdict.failure == "evaluation"
    assert "harness bug" in verdict.reason


BROKEN_HARNESSES = {
    "crashes": "import sys; sys.exit('verifier bug')",
    "garbage": (
        "import marshal, sys; n = marshal.loads(sys.stdin.buffer.read())['nonce']\n"
        "print(n, '{not json')"
    ),
    "wrong_count": (
        "import json, marshal, sys; n = marshal.loads(sys.stdin.buffer.read())['nonce']\n"
        "print(n, json.dumps({'solutions': [{'tests': [{'name': 'a', 'status': 'passed'}]}]}))"
    ),
    "bad_status": (
        "import json, marshal, sys; n = marshal.loads(sys.stdin.buffer.read())['nonce']\n"
        "print(n, json.dumps({'solutions': [{'tests': [{'name': 'a', 'status': 'great'}] * 3}]}))"
    ),
    "twice": (
        "import json, marshal, sys; n = marshal.loads(sys.stdin.buffer.read())['nonce']\n"
        "r = {'solutions': [{'tests': [{'name': 'a', 'status': 'passed'}] * 3}]}\n"
        "print(n, json.dumps(r)); print(n, json.dumps(r))"
    ),
}


@real
@pytest.mark.parametrize("broken", sorted(BROKEN_HARNESSES))
async def test_a_broken_harness_is_an_evaluation_failure(broken: str) -> None:
    verifier = TestsVerifier(harness_source=BROKEN_HARNESSES[broken])
    async with real_sandbox() as sandbox:
        verdict = await verifier.verify(ADD_ONE, "    return x + 1\n", sandbox)
    assert verdict.failure == "evaluation", verdict
    assert not verdict.passed
    assert verdict.score == 0.0


@real
async def test_check_tests_run_next_to_the_solution() -> None:
    task = msgspec.structs.replace(
        ADD_ONE, tests=[TestCase(check="assert candidate(2) == 3\nassert f(0) == 1")]
    )
    async with real_sandbox() as sandbox:
        good = await TestsVerifier().verify(task, "    return x + 1\n", sandbox)
        bad = await TestsVerifier().verify(task, "    return x\n", sandbox)
    assert good.passed
    assert not bad.passed
    assert bad.failure == "agent"


@real
async def test_several_solutions_are_judged_in_one_run() -> None:
    async with real_sandbox() as sandbox:
        verdicts = await TestsVerifier().verify_many(
            ADD_ONE, ["    return x + 1\n", "    return x\n", "    return x + 1\n"], sandbox
        )
    assert [v.passed for v in verdicts] == [True, False, True]


async def test_infrastructure_failure_of_a_batch_is_every_solutions_verdict() -> None:
    verdicts = await TestsVerifier().verify_many(ADD_ONE, ["a", "b"], FakeSandbox())
    assert [v.failure for v in verdicts] == ["infrastructure", "infrastructure"]


async def test_an_exec_infra_error_keeps_its_kind() -> None:
    broken = ExecResult.infra(SandboxBrokenError("gone"))
    verdict = await TestsVerifier().verify(ADD_ONE, "x", FakeSandbox(exec_result=broken))
    assert verdict.reason.startswith("sandbox_broken")
