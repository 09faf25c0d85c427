"""`check_tasks`: does each task verify what it claims? (the engine of `roost tasks check`)

For every task: the canonical solution runs `repeats` times and must pass each time (a verdict
that changes is flaky); every mutant must fail (a task a mutant passes is weakly verified).
Verdicts that blame the infrastructure or the evaluation make the task invalid, with the reason.
Tasks run on `workers` parallel workers, each leasing a warm sandbox from the pool per task.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

import anyio
import structlog

from sandboxes._errors import SandboxInfraError
from sandboxes._protocol import Sandbox
from sandboxes.pool import Lease, SandboxPool
from tasks._lease import lease_within
from tasks._spec import Task, Verdict
from tasks._verify import Verifier, verifier_for
from tasks.mutants import full_program_task, mutants

__all__ = ["CheckReport", "TaskCheck", "check_tasks"]

_log = structlog.get_logger("roost.tasks.check")

LEASE_TIMEOUT_S = 300.0


@dataclasses.dataclass
class TaskCheck:
    """What checking one task found."""

    id: str
    level: int
    canonical_runs: list[bool] = dataclasses.field(default_factory=list)
    mutants: int = 0
    mutants_failed: int = 0
    surviving: list[str] = dataclasses.field(default_factory=list)
    problems: list[str] = dataclasses.field(default_factory=list)
    seconds: float = 0.0

    @property
    def canonical_passed(self) -> bool:
        return bool(self.canonical_runs) and all(self.canonical_runs)

    @property
    def flaky(self) -> bool:
        return len(set(self.canonical_runs)) > 1

    @property
    def weak(self) -> bool:
        return bool(self.surviving)


@dataclasses.dataclass
class CheckReport:
    """The whole file's result; `to_json()` is what `--json` writes."""

    records: list[TaskCheck]
    invalid: list[tuple[str, str]]
    seconds: float

    def to_json(self) -> dict[str, Any]:
        checked = len(self.records)
        invalid = [{"id": i, "reason": r} for i, r in self.invalid]
        invalid += [
            {"id": r.id, "reason": "; ".join(r.problems)} for r in self.records if r.problems
        ]
        mutants = sum(r.mutants for r in self.records)
        killed = sum(r.mutants_failed for r in self.records)
        return {
            "tasks": checked + len(self.invalid),
            "checked": checked,
            "canonical_passed": sum(r.canonical_passed for r in self.records),
            "mutants": mutants,
            "mutants_failed": killed,
            "mutant_kill_rate": killed / mutants if mutants else None,
            "weak": [r.id for r in self.records if r.weak],
            "flaky": [r.id for r in self.records if r.flaky],
            "invalid": invalid,
            "seconds": round(self.seconds, 3),
            "seconds_per_100_tasks": round(100 * self.seconds / checked, 3) if checked else None,
            "records": [
                {
                    **dataclasses.asdict(r),
                    "canonical_passed": r.canonical_passed,
                    "flaky": r.flaky,
                    "weak": r.weak,
                }
                for r in self.records
            ],
        }


async def check_tasks(
    tasks: Sequence[Task],
    pool: SandboxPool,
    *,
    key: str = "python",
    workers: int = 4,
    repeats: int = 2,
    invalid: Sequence[tuple[str, str]] = (),
    verifier: Verifier | None = None,
) -> CheckReport:
    """Check `tasks` on sandboxes of `key` from `pool` (its capacity should be >= `workers`)."""
    started = anyio.current_time()
    records: list[TaskCheck | None] = [None] * len(tasks)
    send, receive = anyio.create_memory_object_stream[int](len(tasks))
    for index in range(len(tasks)):
        send.send_nowait(index)
    send.close()

    async def worker() -> None:
        async with receive.clone() as queue:
            async for index in queue:
                lease = await lease_within(pool, key, LEASE_TIMEOUT_S)
                records[index] = await _check_one(tasks[index], lease, repeats, verifier)

    async with anyio.create_task_group() as tg:
        for _ in range(max(1, workers)):
            tg.start_soon(worker)
    receive.close()
    done = [r for r in records if r is not None]
    return CheckReport(done, list(invalid), anyio.current_time() - started)


async def _check_one(
    task: Task, lease: Lease, repeats: int, verifier: Verifier | None
) -> TaskCheck:
    record = TaskCheck(task.id, task.level)
    started = anyio.current_time()
    healthy = True
    try:
        if task.canonical_solution is None:
            record.problems.append("no canonical solution")
            return record
        try:
            programs = mutants(task)
        except ValueError as exc:
            record.problems.append(str(exc))
            return record
        judge = verifier or verifier_for(task)
        whole = full_program_task(task)
        sandbox = await lease.ready()
        # Canonical runs and mutants as whole programs, so one harness run judges them all.
        texts = [task.program(task.canonical_solution)] * repeats + [m.program for m in programs]
        verdicts = await _judge(judge, whole, texts, sandbox)
        for index, verdict in enumerate(verdicts):
            what = "canonical" if index < repeats else f"mutant {programs[index - repeats].kind}"
            if _blame_elsewhere(verdict, record, what):
                healthy = verdict.failure != "infrastructure"
                return record
        record.canonical_runs = [v.passed for v in verdicts[:repeats]]
        if not record.canonical_passed:
            failing = next(v for v in verdicts[:repeats] if not v.passed)
            record.problems.append(f"canonical solution fails: {failing.reason}")
            return record  # mutants of a wrong program say nothing about the tests
        for mutant, verdict in zip(programs, verdicts[repeats:], strict=True):
            record.mutants += 1
            if verdict.passed:
                record.surviving.append(mutant.kind)
            else:
                record.mutants_failed += 1
    except SandboxInfraError as exc:
        healthy = False
        record.problems.append(f"sandbox failed: {exc}")
    except Exception as exc:  # one task's surprise must not end the whole check
        _log.error("check_error", task=task.id, exc_info=exc)
        healthy = False
        record.problems.append(f"check crashed: {type(exc).__name__}: {exc}")
    finally:
        lease.release(healthy=healthy)
        record.seconds = anyio.current_time() - started
    return record


async def _judge(judge: Verifier, task: Task, texts: list[str], sandbox: Sandbox) -> list[Verdict]:
    """Verdicts for `texts`, in one harness run when the verifier can batch them."""
    many = getattr(judge, "verify_many", None)
    if many is not None:
        return list(await many(task, texts, sandbox))
    return [await judge.verify(task, text, sandbox) for text in texts]


def _blame_elsewhere(verdict: Verdict, record: TaskCheck, what: str) -> bool:
    if verdict.failure in ("infrastructure", "evaluation"):
        record.problems.append(f"{what}: {verdict.failure} failure: {verdict.reason}")
        return True
    return False
