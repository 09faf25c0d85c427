"""Verifiers: run a task's tests against a solution inside a sandbox, return a `Verdict`.

The verifier never runs solution code in the host process. It writes the solution into the
sandbox, starts the harness (`tasks/_harness.py`) with the tests and a fresh nonce on stdin, and
accepts only the one stdout line that carries the nonce. Who is to blame decides the verdict:

- the sandbox failed (an `infra_error`, a `SandboxInfraError`, no answer before the deadline):
  `infrastructure`;
- the program failed tests, timed out, crashed, hit a limit, or killed the harness: `agent`;
- the harness or the verifier itself broke (no record after a normal exit, garbage, a record
  that does not match the tests, an exception in this module): `evaluation`.
"""

from __future__ import annotations

import marshal
import secrets
from typing import Protocol

import anyio
import msgspec
import structlog

from sandboxes._errors import SandboxConfigError, SandboxFileError, SandboxInfraError
from sandboxes._protocol import Sandbox
from tasks._harness import CHILD_SOURCE, HARNESS_SOURCE
from tasks._spec import Task, TestOutcome, Verdict

__all__ = ["TestsVerifier", "Verifier", "verifier_for"]

_log = structlog.get_logger("roost.verify")

IMPORT_ALLOWANCE_S = 5.0  # the harness gives a solution this long to load, on top of a test's
HOST_GRACE_S = 10.0  # beyond the exec's own timeout, before we blame the sandbox


class Verifier(Protocol):
    """Scores `text` (the agent's answer) for `task` in a started `sandbox`; never raises."""

    async def verify(self, task: Task, text: str, sandbox: Sandbox) -> Verdict: ...


class _Judged(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    tests: list[TestOutcome]


class _Record(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    solutions: list[_Judged]


_decode_record = msgspec.json.Decoder(_Record)


class TestsVerifier:
    """The `tests` verifier: hidden call/expected tests judged by an out-of-process harness.

    :param harness_source: the harness program (tests inject a broken one).
    :param python: the interpreter inside the sandbox.
    """

    __test__ = False

    def __init__(self, *, harness_source: str = HARNESS_SOURCE, python: str = "python3") -> None:
        self.harness_source = harness_source
        self.python = python

    def exec_timeout(self, task: Task, solutions: int = 1) -> float:
        """The most judging `solutions` solutions may take inside the sandbox."""
        return solutions * ((len(task.tests) + 1) * (task.timeout_s + 0.5) + IMPORT_ALLOWANCE_S)

    async def verify(self, task: Task, text: str, sandbox: Sandbox) -> Verdict:
        return (await self.verify_many(task, [text], sandbox))[0]

    async def verify_many(self, task: Task, texts: list[str], sandbox: Sandbox) -> list[Verdict]:
        """One verdict per text, judged one after the other in a single harness run (for
        trusted texts such as canonical solutions and mutants: they share the work directory).
        """
        if not texts:
            return []
        started = anyio.current_time()
        try:
            with anyio.move_on_after(self.exec_timeout(task, len(texts)) + HOST_GRACE_S) as scope:
                verdicts = await self._verify(task, texts, sandbox)
            if scope.cancelled_caught:
                verdicts = [
                    Verdict.infrastructure("the sandbox did not answer before the deadline")
                ]
        except SandboxInfraError as exc:
            verdicts = [Verdict.infrastructure(f"{type(exc).__name__}: {exc}")]
        except SandboxConfigError as exc:  # a path in the task itself is unusable
            verdicts = [Verdict.evaluation(f"task cannot be placed in the sandbox: {exc}")]
        except SandboxFileError as exc:  # the sandbox is healthy; the agent filled or broke it
            verdicts = [Verdict(passed=False, score=0.0, failure="agent", reason=str(exc))]
        except Exception as exc:  # a bug here must be counted, never crash the evaluator
            _log.error("verifier_error", task=task.id, exc_info=exc)
            verdicts = [Verdict.evaluation(f"verifier crashed: {type(exc).__name__}: {exc}")]
        if len(verdicts) != len(texts):  # one failure of the whole run is every text's verdict
            verdicts = verdicts[:1] * len(texts)
        per = (anyio.current_time() - started) / len(texts)
        return [msgspec.structs.replace(v, duration_s=per) for v in verdicts]

    async def _verify(self, task: Task, texts: list[str], sandbox: Sandbox) -> list[Verdict]:
        for path, content in task.files.items():
            await sandbox.put_file(path, content.encode())
        nonce = secrets.token_hex(16)
        job = {
            "nonce": nonce,
            "tests": [msgspec.to_builtins(test) for test in task.tests],
            "timeout_s": task.timeout_s,
            "module": task.solution_file.removesuffix(".py"),
            "entry": task.entry_point,
            "child": CHILD_SOURCE,
            "solutions": [task.program(text) for text in texts],
        }
        result = await sandbox.exec(
            [self.python, "-I", "-S", "-c", self.harness_source],
            # marshal (format 4, read by every Python 3.4+): the harness need not import json.
            stdin=marshal.dumps(job, 4),
            timeout=self.exec_timeout(task, len(texts)),
        )
        if result.infra_error is not None:
            failure = result.infra_error
            return [Verdict.infrastructure(f"{failure.kind}: {failure.message}")]
        prefix = nonce.encode() + b" "
        records = [line for line in result.stdout.splitlines() if line.startswith(prefix)]
        if not records:
            if result.timed_out or result.oom_killed or result.signal is not None:
                # The harness was killed: by the sandbox's limits, or by the solution itself.
                why = (
                    "timed out"
                    if result.timed_out
                    else "ran out of memory"
                    if result.oom_killed
                    else f"was killed by signal {result.signal}"
                )
                return [Verdict(passed=False, score=0.0, failure="agent", reason=f"harness {why}")]
            tail = result.stderr.decode(errors="replace").strip()[-500:]
            return [
                Verdict.evaluation(f"harness gave no verdict (exit {result.exit_code}): {tail}")
            ]
        if len(records) > 1:
            return [Verdict.evaluation("harness gave more than one verdict")]
        try:
            record = _decode_record.decode(records[0][len(prefix) :])
        except msgspec.DecodeError as exc:
            return [Verdict.evaluation(f"harness verdict is garbage: {exc}")]
        if len(record.solutions) != len(texts):
            return [Verdict.evaluation("harness judged a different number of solutions")]
        return [_verdict(task, judged.tests) for judged in record.solutions]


def _verdict(task: Task, outcomes: list[TestOutcome]) -> Verdict:
    if len(outcomes) != len(task.tests):
        return Verdict.evaluation(
            f"harness judged {len(outcomes)} tests, the task has {len(task.tests)}"
        )
    passed = sum(outcome.status == "passed" for outcome in outcomes)
    ok = passed == len(outcomes)
    failing = next((t for t in outcomes if t.status != "passed"), None)
    return Verdict(
        passed=ok,
        score=passed / len(outcomes),
        tests=outcomes,
        failure=None if ok else "agent",
        reason="" if failing is None else f"{failing.name}: {failing.status} {failing.detail}",
    )


_VERIFIERS: dict[str, Verifier] = {"tests": TestsVerifier()}


def verifier_for(task: Task) -> Verifier:
    """The verifier named by `task.verifier`."""
    return _VERIFIERS[task.verifier]
