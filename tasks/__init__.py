"""tasks: verifiable task specs, loaders, procedural code tasks, verifiers and mutants.

See docs/tasks.md for the task format, the verdict and the failure taxonomy.
"""

from tasks._lease import lease_within
from tasks._load import LoadResult, TaskFormatError, dump_jsonl, load_tasks, read_tasks
from tasks._reuse import ReusingVerifier
from tasks._spec import FailureKind, Risk, Task, TestCase, TestOutcome, TestStatus, Verdict
from tasks._verify import TestsVerifier, Verifier, verifier_for
from tasks.check import CheckReport, TaskCheck, check_tasks
from tasks.monitor import Alarm, MonitorConfig, RewardMonitor
from tasks.mutants import Mutant, canary_tasks, full_program_task, mutants
from tasks.procedural import MAX_LEVEL, ProceduralTasks

__all__ = [
    "MAX_LEVEL",
    "Alarm",
    "CheckReport",
    "FailureKind",
    "LoadResult",
    "MonitorConfig",
    "Mutant",
    "ProceduralTasks",
    "ReusingVerifier",
    "RewardMonitor",
    "Risk",
    "Task",
    "TaskCheck",
    "TaskFormatError",
    "TestCase",
    "TestOutcome",
    "TestStatus",
    "TestsVerifier",
    "Verdict",
    "Verifier",
    "canary_tasks",
    "check_tasks",
    "dump_jsonl",
    "full_program_task",
    "lease_within",
    "load_tasks",
    "mutants",
    "read_tasks",
    "verifier_for",
]
