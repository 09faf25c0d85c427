"""`ReusingVerifier`: one real run per distinct (tests, program), its verdict shared.

In RL most answers repeat: a group's samples of a task agree once the policy is sure, and a
revision often rewrites the same wrong answer. In the default run 69 % of the verifications
were exact repeats of an earlier (task, answer) pair, and the sandboxes' interpreters took
about as much CPU as the model (docs/benchmarks.md, "Reused verdicts"). This wrapper runs each
distinct program once on a task's tests and hands its verdict to every repeat, including
repeats that arrive while the first run is still going (they wait for it rather than start
their own).

Every reward still comes from a real execution of that exact program on those exact tests;
what it assumes is that the tests are deterministic. Only outcomes that do not depend on the
machine's load or the sandbox's state are reused: a pass, and a failure whose tests each
passed, failed or raised (`error`: in the call, or while the program loaded). A timeout, a
crash, a limit, a broken sandbox or a broken verifier is never reused, so its repeat runs for
itself; the harness reports a load that timed out or died as `timeout` or `crash`, never
`error`, for that reason.
"""

from __future__ import annotations

import collections
import hashlib

import anyio
import msgspec

from sandboxes._protocol import Sandbox
from tasks._spec import Task, Verdict
from tasks._verify import Verifier

__all__ = ["ReusingVerifier", "reusable", "verdict_key"]

# `error` is an exception the program raised, a function of the program; never the harness's
# word for a load that timed out or died (tasks/_harness.py reports those as timeout or crash).
_REUSABLE_STATUSES = frozenset({"passed", "failed", "error"})
_encode = msgspec.msgpack.Encoder()


def reusable(task: Task, verdict: Verdict) -> bool:
    """Whether `verdict` is a function of the program and the tests alone."""
    return (
        verdict.failure in (None, "agent")
        and len(verdict.tests) == len(task.tests) > 0
        and all(outcome.status in _REUSABLE_STATUSES for outcome in verdict.tests)
    )


def verdict_key(task: Task, text: str) -> bytes:
    """What a verdict is a function of: the task's tests (and files, entry point) and the
    program; equal keys get equal verdicts from deterministic tests."""
    judged = (task.id, task.entry_point, task.solution_file, task.tests, task.files, text)
    return hashlib.blake2b(_encode.encode(judged), digest_size=16).digest()


class ReusingVerifier:
    """A `Verifier` that runs `inner` once per distinct (task's tests, program) pair.

    :param inner: the verifier that runs the program in the sandbox.
    :param capacity: how many verdicts to keep (least recently used dropped first).
    """

    def __init__(self, inner: Verifier, *, capacity: int = 65536) -> None:
        if capacity < 1:
            raise ValueError(f"capacity: must be >= 1, got {capacity}")
        self._inner = inner
        self._capacity = capacity
        self._verdicts: collections.OrderedDict[bytes, Verdict] = collections.OrderedDict()
        self._running: dict[bytes, anyio.Event] = {}
        self.runs = 0  # verifications `inner` ran
        self.reused = 0  # verdicts handed to a repeat

    async def verify(self, task: Task, text: str, sandbox: Sandbox) -> Verdict:
        key = verdict_key(task, text)
        running = self._running.get(key)
        if running is not None:
            await running.wait()
        known = self._verdicts.get(key)
        if known is not None:
            self._verdicts.move_to_end(key)
            self.reused += 1
            return msgspec.structs.replace(known, reused=True)
        if running is not None:
            # The first run ended without a reusable verdict (a timeout, a broken sandbox, a
            # cancelled episode): each of its repeats runs for itself, side by side.
            self.runs += 1
            return await self._inner.verify(task, text, sandbox)
        done = self._running[key] = anyio.Event()
        try:
            self.runs += 1
            verdict = await self._inner.verify(task, text, sandbox)
            if reusable(task, verdict):
                self._verdicts[key] = verdict
                if len(self._verdicts) > self._capacity:
                    self._verdicts.popitem(last=False)
            return verdict
        finally:
            del self._running[key]
            done.set()
