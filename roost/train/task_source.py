"""The experiment's tasks: training streams per level, a fixed held-out set, demonstrations,
and the text of each turn's prompt (the task, then the last attempt and why it failed).

Held-out tasks are never trained on: procedural tasks are split by function digest (the same
function never lands on both sides), a task file by a digest of each task id. A level's
procedural held-out set is spread evenly over its held-out functions (`take_by_function`).
Demonstrations (canonical solutions) are used only at the levels named in `tasks.demo_levels`.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from roost.train.config import TasksConfig
from tasks import ProceduralTasks, Task, Verdict, load_tasks
from tasks._chain_ast import parse_chain
from tasks.procedural import CHAIN_LEVELS, chain_form

__all__ = ["TaskSource", "first_prompt", "procedural_tasks", "revision_prompt"]

FEEDBACK_CHARS = 120


def first_prompt(task: Task) -> str:
    return task.prompt


def revision_prompt(task: Task, attempt: str, verdict: Verdict) -> str:
    """The task again, with the last attempt and the first failing test as comments: the
    model writes the whole body anew (the program is always `prefix + body`). The attempt's
    own comment lines are left out: its code is what failed."""
    code = [line.strip() for line in attempt.strip().splitlines()]
    tried = " ".join(line for line in code if not line.startswith("#"))[:FEEDBACK_CHARS]
    why = " ".join((verdict.reason or "wrong answer").split())[:FEEDBACK_CHARS]
    return f"{task.prompt}    # tried: {tried}\n    # failed: {why}\n"


def procedural_tasks(config: TasksConfig) -> ProceduralTasks:
    """The generator a run with `config` draws its procedural tasks from (the same tasks,
    splits and canonical solutions wherever it is built)."""
    return ProceduralTasks(
        seed=config.seed,
        max_level=max(config.levels),
        heldout_percent=config.heldout_percent,
        solution_style=config.solution_style,
    )


def _digest_percent(text: str) -> int:
    return int(hashlib.blake2b(text.encode(), digest_size=4).hexdigest(), 16) % 100


class TaskSource:
    """Training tasks on demand, the held-out set, and demonstration pairs.

    :raises ValueError: a task file with no usable training or held-out task.
    :raises tasks.TaskFormatError: a malformed task file.
    """

    def __init__(self, config: TasksConfig, *, base_dir: Path | None = None) -> None:
        self.config = config
        self.levels = sorted(set(config.levels))
        self.demo_levels = sorted(set(config.demo_levels))
        self._procedural: ProceduralTasks | None = None
        self._train: dict[int, list[Task]] = {}
        self._heldout: dict[int, list[Task]] = {}
        self._demos: list[tuple[str, str]] | None = None
        if config.source == "procedural":
            self._procedural = procedural_tasks(config)
            for level in self.levels:
                self._heldout[level] = self._procedural.take_by_function(
                    level, config.heldout_per_level, split="heldout"
                )
        else:
            path = Path(config.path)
            if not path.is_absolute() and base_dir is not None and not path.exists():
                path = base_dir / path
            loaded = [t for t in load_tasks(path) if t.level in self.levels]
            ranked = sorted(loaded, key=lambda t: _digest_percent(t.id))
            held = [t for t in ranked if _digest_percent(t.id) < config.heldout_percent]
            if not held and len(ranked) >= 2:
                held = ranked[:1]  # a small file still gets one held-out task
            train = [t for t in ranked if t not in held]
            if not train or not held:
                raise ValueError(
                    f"tasks.path: {path} has {len(loaded)} tasks at levels {self.levels}; "
                    "need at least one for training and one held out"
                )
            for task in train:
                self._train.setdefault(task.level, []).append(task)
            for task in held:
                self._heldout.setdefault(task.level, []).append(task)
            self.levels = sorted(self._train)

    def train_task(self, level: int, index: int) -> tuple[Task, int]:
        """The training task at or after `index` of `level`, and the index after it."""
        if self._procedural is not None:
            while True:
                task = self._procedural.task(level, index)
                index += 1
                if self._procedural.split_of(task) == "train":
                    return task, index
        pool = self._train[level]
        return pool[index % len(pool)], index + 1

    def form(self, task: Task) -> str | None:
        """The form of a procedural chain task (`tasks.procedural.chain_form`, read off its
        canonical solution), or None: a task file's, a list or conditional level's."""
        if self._procedural is None or task.level > CHAIN_LEVELS or not task.canonical_solution:
            return None
        steps = parse_chain(task.canonical_solution)
        return None if steps is None else chain_form(kind for kind, _ in steps)

    def heldout(self) -> list[Task]:
        return [task for level in sorted(self._heldout) for task in self._heldout[level]]

    def risks(self) -> set[str]:
        """The risk levels (`Task.risk`) of the run's tasks, training and held out: which
        sandbox backends it needs. Procedural tasks are the generator's own code: low."""
        if self._procedural is not None:
            return {"low"}
        return {t.risk for tasks in (*self._train.values(), *self._heldout.values()) for t in tasks}

    def demos(self) -> list[tuple[str, str]]:
        """(prompt, canonical solution) pairs of training tasks at the demonstration levels; for
        procedural tasks a share `tasks.revision_demos` in revision form (revision_demos.py).
        Made once (about 1.4 s for the default's 8,000): the warm start, the learner's
        rehearsal and the control all train on the same pairs."""
        if self._demos is None:
            self._demos = self._make_demos()
        return list(self._demos)

    def _make_demos(self) -> list[tuple[str, str]]:
        if self._procedural is not None:
            from roost.train.revision_demos import revision_demos

            procedural = self._procedural
            tasks = [
                task
                for level in self.demo_levels
                for task in procedural.take(level, self.config.demos_per_level, split="train")
            ]
            return revision_demos(tasks, self.config.revision_demos, seed=self.config.seed)
        # A task file's solutions are not run outside a sandbox: first turns only.
        return [
            (first_prompt(t), t.canonical_solution)
            for level in self.demo_levels
            for t in self._train.get(level, [])
            if t.canonical_solution
        ]

    def is_demo_level(self, level: int) -> bool:
        return level in self.demo_levels

    def solved_by(self, body: str) -> Task | None:
        """The training task at a test-only level of this run that `body` answers, by what
        its expression computes (`ProceduralTasks.task_solved_by`), or None: a task file,
        a body that is no chain, a held-out function, a level not trained or one with
        demonstrations. Nothing is run here: the caller runs the task's tests."""
        if self._procedural is None:
            return None
        task = self._procedural.task_solved_by(body)
        if task is None or self._procedural.split_of(task) != "train":
            return None
        if task.level not in self.levels or self.is_demo_level(task.level):
            return None
        return task
