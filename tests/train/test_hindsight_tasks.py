"""Hindsight tasks (`episode.relabel`): a failed program that answers another training task,
checked on that task's tests in the episode's sandbox, trains as that task's first pass."""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from actors._learner_core import Trajectory, stem_labels
from actors.rollouts import RolloutRequest
from actors.sandbox_worker import Assign, WorkerDone
from policies.neural import Sample
from policies.staleness import StalenessBook
from policies.tokenizer import ByteTokenizer
from roost.train.collector import solved_samples
from roost.train.config import ConfigError, TasksConfig, load_train_config
from roost.train.episode import EpisodeStore, EpisodeTurn, EpisodeWorker, Solved, encode_prompt
from roost.train.records import TurnRecord
from roost.train.task_source import TaskSource, first_prompt
from runtime import Actor, ActorSystem, handler
from sandboxes._protocol import Sandbox
from tasks import ProceduralTasks, Task, TestsVerifier, Verdict, Verifier
from tests.conftest import REAL
from tests.tasks._helpers import real_sandbox

OTHER = "    return abs(x * 2) + 5\n"  # a three-operation chain: a level-3 training task


def test_the_source_offers_training_tasks_at_test_only_levels_only() -> None:
    source = TaskSource(TasksConfig(levels=[1, 2, 3], demo_levels=[1, 2]))
    task = source.solved_by(OTHER)
    assert task is not None
    assert task.level == 3
    assert "train" in task.tags
    assert source.solved_by("    return (x + 3) * 2\n") is None  # level 2 has demonstrations
    assert source.solved_by("    return x + 1 + 2 + 3\n") is None  # level 4 is not trained
    heldout = [t for t in source.heldout() if t.level == 3]
    assert heldout
    assert all(source.solved_by(t.canonical_solution) is None for t in heldout)


def test_relabelling_needs_procedural_tasks() -> None:
    with pytest.raises(ConfigError, match=r"episode\.relabel"):
        load_train_config(
            overrides=["tasks.source=jsonl", "tasks.path=x.jsonl", "episode.relabel=test_only"]
        )
    with pytest.raises(ConfigError, match="relabel"):
        load_train_config(overrides=["episode.relabel=always"])


class _Saying:
    """A generator client whose model always writes `text`."""

    def __init__(self, text: str) -> None:
        self.tokens = ByteTokenizer().encode(text, bos=False)

    async def generate(self, prompt: list[int]) -> Sample:
        return Sample(list(self.tokens), [-0.5] * len(self.tokens), [3] * len(self.tokens))


class _Lease:
    def __init__(self, sandbox: Any) -> None:
        self.sandbox, self.cold, self.healthy = sandbox, False, None

    async def ready(self) -> Any:
        return self.sandbox

    def release(self, *, healthy: bool = True) -> None:
        self.healthy = healthy


class _Scheduler(Actor):
    """Takes the worker's report."""

    def __init__(self, reports: list[WorkerDone], done: anyio.Event) -> None:
        self.reports, self.done = reports, done

    @handler
    def report(self, msg: WorkerDone) -> None:
        self.reports.append(msg)
        self.done.set()


async def _episode(
    asked: Task, text: str, source: TaskSource | None, verifier: Verifier | None = None
) -> list[EpisodeTurn]:
    """One two-turn episode of `asked` in a real sandbox, the model writing `text`."""
    store = EpisodeStore()
    reports: list[WorkerDone] = []
    reported = anyio.Event()
    async with real_sandbox() as sandbox, ActorSystem() as system:
        worker = system.spawn(
            lambda: EpisodeWorker(
                task_of=lambda _: asked,
                client=_Saying(text),  # type: ignore[arg-type]
                book=StalenessBook(k=2, batch_size=8),
                store=store,
                max_turns=2,
                prompt_room=448,
                verifier=verifier or TestsVerifier(),
                solved_by=source.solved_by if source is not None else None,
            ),
            name="worker",
        )
        scheduler = system.spawn(lambda: _Scheduler(reports, reported), name="scheduler")
        lease = _Lease(sandbox)
        request = RolloutRequest(rollout_id="g/0", task_id=asked.id)
        deadline = anyio.current_time() + 60
        await worker.tell(Assign(request, 1, lease, deadline, scheduler))
        with anyio.fail_after(60):
            await reported.wait()
    assert [r.outcome for r in reports] == ["failed"]
    assert lease.healthy
    return store.pop("g/0")


@pytest.mark.anyio
@pytest.mark.parametrize("anyio_backend", [REAL])
async def test_a_failed_turn_that_passes_another_tasks_tests_carries_that_task() -> None:
    source = TaskSource(TasksConfig(levels=[1, 2, 3], demo_levels=[1, 2]))
    asked = next(t for t in ProceduralTasks(seed=0).stream(3) if "abs" not in t.canonical_solution)
    goal = source.solved_by(OTHER)
    assert goal is not None
    turns = await _episode(asked, OTHER, source)
    assert len(turns) == 2  # both turns failed the task asked
    for turn in turns:
        assert not turn.verdict.passed
        assert turn.solved is not None
        assert turn.solved.task.id == goal.id
        assert turn.solved.prompt == encode_prompt(ByteTokenizer(), first_prompt(goal), 448)
    # Off, or a program that answers nothing trained (a two-operation chain: level 2 has
    # demonstrations), carries none.
    assert all(t.solved is None for t in await _episode(asked, OTHER, None))
    two_ops = "    return abs(x * 2)\n"
    assert all(t.solved is None for t in await _episode(asked, two_ops, source))


class _BrokenOnHindsight:
    """Judges the task asked; raises on a hindsight task (a bug in the extra check)."""

    async def verify(self, task: Task, text: str, sandbox: Sandbox) -> Verdict:
        if task.id.endswith("-solved"):
            raise RuntimeError("harness bug")
        return await TestsVerifier().verify(task, text, sandbox)


@pytest.mark.anyio
@pytest.mark.parametrize("anyio_backend", [REAL])
async def test_a_broken_hindsight_check_costs_the_turn_nothing() -> None:
    source = TaskSource(TasksConfig(levels=[1, 2, 3], demo_levels=[1, 2]))
    asked = next(t for t in ProceduralTasks(seed=0).stream(3) if "abs" not in t.canonical_solution)
    turns = await _episode(asked, OTHER, source, _BrokenOnHindsight())
    assert len(turns) == 2  # the episode went on: both turns judged on the task asked
    assert all(t.solved is None and t.verdict.failure == "agent" for t in turns)


def test_a_solved_turn_trains_as_the_other_tasks_first_pass() -> None:
    goal = ProceduralTasks(seed=0, max_level=3).task_solved_by(OTHER)
    assert goal is not None
    failed = Verdict(passed=False, score=0.25, failure="agent")
    plain = EpisodeTurn([1, 7], Sample([2, 3], [-0.1, -0.2], [4, 4]), "y", failed, 0.1, 0.1)
    solved = EpisodeTurn(
        [1, 8], Sample([5, 6], [-0.3, -0.2], [4, 5]), OTHER, failed, 0.1, 0.1, Solved(goal, [1, 9])
    )
    [sample] = solved_samples("g/0", [plain, solved])
    assert sample == Trajectory(
        rollout_id="g/0#g1",
        prompt=[1, 9],  # the other task's first prompt
        completion=[5, 6],
        logprobs=[-0.3, -0.2],
        versions=[4, 5],  # the staleness bound still sees the tokens' versions
        reward=1.0,
        relabelled=True,
        goal=goal.id,
    )
    assert solved_samples("g/1", [plain]) == []
    assert TurnRecord(text="", passed=False, score=0.0).solved == ""


def test_a_hindsight_sample_gets_a_stem_of_its_own() -> None:
    def sample(goal: str = "") -> Trajectory:
        return Trajectory("r#0", [1, 2], [3], [0.0], [0], 0.0, goal=goal)

    groups = [[sample(), sample(), sample("T"), sample("T"), sample("U")], [sample()]]
    assert stem_labels(groups) == [0, 0, 1, 1, 2, 3]
