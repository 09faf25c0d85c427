"""`EpisodeWorker`: one multi-turn coding episode on a leased sandbox.

The model writes a function body; the sandbox runs the task's hidden tests (the `tests`
verifier, out of the solution's reach); on a failure the model sees its attempt and the first
failing test and writes again, up to `max_turns`. The scheduler's contract is that of
`actors.sandbox_worker`: one `WorkerDone` per `Assign`, whatever happened, and the lease always
released. Like `TrackedWorker`, it tells the staleness book that the episode ended before the
scheduler hears of it. The turns wait in an `EpisodeStore` for the collector.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import anyio

from actors.generator import GenerationError, GeneratorClient
from actors.rollouts import StepTiming
from actors.sandbox_worker import Assign, Outcome, WorkerDone, report_done
from policies.neural import Sample
from policies.staleness import StalenessBook
from policies.tokenizer import ByteTokenizer
from roost.train.task_source import first_prompt, revision_prompt
from runtime import Actor, handler
from sandboxes._errors import SandboxInfraError
from sandboxes._protocol import Sandbox
from tasks import Task, Verdict, Verifier
from tasks._verify import TestsVerifier

__all__ = ["EpisodeStore", "EpisodeTurn", "EpisodeWorker", "Solved", "encode_prompt"]


@dataclasses.dataclass(frozen=True, slots=True)
class Solved:
    """Another task a failed turn's program passed the tests of, with that task's first
    prompt as the model sees it (a hindsight task)."""

    task: Task
    prompt: list[int]


@dataclasses.dataclass(frozen=True, slots=True)
class EpisodeTurn:
    prompt: list[int]
    sample: Sample
    text: str
    verdict: Verdict
    generate_s: float
    exec_s: float  # the task's tests, and a hindsight task's when one was tried
    solved: Solved | None = None


class EpisodeStore:
    """Turns of finished episodes, by rollout id, until the collector takes them."""

    def __init__(self) -> None:
        self._turns: dict[str, list[EpisodeTurn]] = {}

    def put(self, rollout_id: str, turns: list[EpisodeTurn]) -> None:
        self._turns[rollout_id] = turns

    def pop(self, rollout_id: str) -> list[EpisodeTurn]:
        return self._turns.pop(rollout_id, [])


def encode_prompt(tokenizer: ByteTokenizer, text: str, room: int) -> list[int]:
    """BOS + the prompt's bytes, cut from the left to fit `room` tokens (the end of a prompt,
    where the body starts, matters most). With `room` <= 1, BOS alone: the shortest prompt."""
    ids = tokenizer.encode(text, bos=False)
    keep = max(0, room - 1)  # ids[-0:] would be the whole prompt
    return [tokenizer.bos, *ids[max(0, len(ids) - keep) :]]


class EpisodeWorker(Actor):
    """One episode at a time; spawn as many as the concurrency you want."""

    def __init__(
        self,
        *,
        task_of: Callable[[str], Task],
        client: GeneratorClient,
        book: StalenessBook,
        store: EpisodeStore,
        max_turns: int,
        prompt_room: int,
        verifier: Verifier | None = None,
        solved_by: Callable[[str], Task | None] | None = None,
    ) -> None:
        self.task_of = task_of
        self.client = client
        self.book = book
        self.store = store
        self.max_turns = max_turns
        self.prompt_room = prompt_room
        self.verifier = verifier or TestsVerifier()
        # The task a failed program may answer instead (TaskSource.solved_by); None: off.
        self.solved_by = solved_by
        self.tokenizer = ByteTokenizer()

    @handler
    async def assign(self, msg: Assign) -> None:
        try:
            done = await self._episode(msg)
        finally:
            self.book.ended(msg.request.rollout_id)
        await report_done(self, msg, done)

    async def _episode(self, msg: Assign) -> WorkerDone:
        request, lease = msg.request, msg.lease
        started = anyio.current_time()
        turns: list[EpisodeTurn] = []
        outcome: Outcome = "failed"
        reason, acquire_s, healthy = "", 0.0, True
        try:
            task = self.task_of(request.task_id)
            with anyio.move_on_after(max(0.0, msg.deadline_at - started)) as deadline:
                sandbox = await lease.ready()
                acquire_s = anyio.current_time() - started
                self.book.began(request.rollout_id)
                prompt = first_prompt(task)
                for _ in range(self.max_turns):
                    t0 = anyio.current_time()
                    ids = encode_prompt(self.tokenizer, prompt, self.prompt_room)
                    sample = await self.client.generate(ids)
                    text = self.tokenizer.decode(sample.tokens)
                    t1 = anyio.current_time()
                    verdict = await self.verifier.verify(task, text, sandbox)
                    solved = None
                    if verdict.failure == "agent":  # a wrong program, not a broken run
                        solved = await self._hindsight(text, sandbox, task)
                    t2 = anyio.current_time()
                    turns.append(EpisodeTurn(ids, sample, text, verdict, t1 - t0, t2 - t1, solved))
                    if verdict.failure == "infrastructure":
                        outcome, reason, healthy = "infra", verdict.reason, False
                        break
                    if verdict.failure == "evaluation":
                        outcome, reason = "error", f"evaluation: {verdict.reason}"
                        break
                    if verdict.passed:
                        outcome = "passed"
                        break
                    prompt = revision_prompt(task, text, verdict)
            if deadline.cancelled_caught:
                outcome, reason, healthy = "deadline", "deadline passed", False
        except SandboxInfraError as exc:
            outcome, reason, healthy = "infra", str(exc), False
        except GenerationError as exc:
            outcome, reason = "error", f"generation: {exc}"
        except Exception as exc:  # a bug must be reported, never vanish with the episode
            self.log.error("episode_error", rollout=request.rollout_id, exc_info=exc)
            outcome, reason, healthy = "error", f"{type(exc).__name__}: {exc}", False
        except BaseException:
            # Cancelled (the phase ended, the run stopped): an exec may still be running in
            # the sandbox, so it is recycled, not reset for the next episode.
            healthy = False
            raise
        finally:
            lease.release(healthy=healthy)
        self.store.put(request.rollout_id, turns)
        return WorkerDone(
            rollout_id=request.rollout_id,
            attempt=msg.attempt,
            outcome=outcome,
            reason=reason,
            started_at=started,
            acquire_s=acquire_s,
            cold_start=lease.cold,
            steps=[StepTiming(t.generate_s, t.exec_s) for t in turns],
            worker=self.name,
            dispatch=msg.dispatch,
        )

    async def _hindsight(self, text: str, sandbox: Sandbox, task: Task) -> Solved | None:
        """The task this failed program answers instead, when there is one and its tests,
        run here in the same sandbox under the same deadline, pass. Only a task of `task`'s
        risk: this sandbox's backend is the one chosen for that risk (`sandbox.isolation`)."""
        if self.solved_by is None:
            return None
        goal: Task | None = None
        try:
            goal = self.solved_by(text)
            if goal is None or goal.risk != task.risk:
                return None
            verdict = await self.verifier.verify(goal, text, sandbox)
        except SandboxInfraError:
            raise  # the sandbox broke: the episode ends as for its own task's tests
        except Exception as exc:  # an extra check must not cost the turn its own verdict
            goal_id = goal.id if goal is not None else None
            self.log.warning("hindsight_check_failed", task=goal_id, error=repr(exc))
            return None
        if not verdict.passed:
            return None
        return Solved(goal, encode_prompt(self.tokenizer, first_prompt(goal), self.prompt_room))
