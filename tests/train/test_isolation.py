"""Per-task isolation in `roost train`: each task's programs run on the backend its risk is
given (`sandbox.isolation` over `sandbox.backend`), in training and in held-out checks."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import msgspec
import pytest

from roost.train.config import ConfigError, TrainConfig, load_train_config
from roost.train.isolation import SandboxRouting
from sandboxes import Sandbox, SandboxSpec, create_sandbox
from tasks import Task, TestCase

pytestmark = pytest.mark.anyio


def _task(risk: str) -> Task:
    tests = [TestCase(call="f(1)", expected="1")]
    return Task(id=f"t-{risk}", prompt="p", entry_point="f", tests=tests, risk=risk)  # type: ignore[arg-type]


def test_without_isolation_every_task_shares_the_runs_backend_under_its_runtime() -> None:
    routing = SandboxRouting(load_train_config().sandbox)
    assert {routing.key_for(_task(risk)) for risk in ("low", "medium", "high")} == {"python"}
    assert routing.keys(["low", "high"]) == ["python"]
    assert routing.spec_for("python", SandboxSpec()).backend == "process"


def test_a_risk_given_another_backend_gets_its_own_pool_key_and_spec() -> None:
    section = load_train_config(overrides=['sandbox.isolation={high = "gvisor"}']).sandbox
    routing = SandboxRouting(section)
    assert routing.key_for(_task("low")) == "python"
    assert routing.key_for(_task("medium")) == "python"
    assert routing.key_for(_task("high")) == "python@gvisor"
    assert routing.keys(["high", "low"]) == ["python", "python@gvisor"]
    assert routing.keys(["high"]) == ["python@gvisor"]
    assert routing.backends(["low", "high"]) == {"process", "gvisor"}
    spec = routing.spec_for("python@gvisor", SandboxSpec(memory=2**28))
    assert (spec.backend, spec.runtime, spec.memory) == ("gvisor", "python", 2**28)


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ('sandbox.isolation={extreme = "gvisor"}', "isolation: unknown risk 'extreme'"),
        ('sandbox.isolation={high = "firecracker"}', "Invalid enum value 'firecracker'"),
    ],
)
def test_a_bad_isolation_table_is_a_config_error_naming_it(override: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        load_train_config(overrides=[override])


def _tasks_file(path: Path) -> Path:
    rows = [
        {
            "id": f"add{k}",
            "prompt": f'def f(x):\n    """Add {k}."""\n',
            "entry_point": "f",
            "tests": [{"call": "f(1)", "expected": str(1 + k)}],
            "canonical_solution": f"    return x + {k}\n",
            "risk": "high" if k % 2 else "low",
        }
        for k in range(12)
    ]
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path


async def test_a_run_routes_each_task_to_its_risks_backend(
    tiny_config: TrainConfig, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Every sandbox the run makes is recorded with the backend it was asked for, then made as
    # a process sandbox, so the test needs no Docker; the routing is what is under test.
    made: list[tuple[str, str]] = []

    def recording(spec: SandboxSpec) -> Sandbox:
        made.append((spec.runtime, spec.backend))
        return create_sandbox(msgspec.structs.replace(spec, backend="process"))

    asked: list[tuple[str, str]] = []
    key_for = SandboxRouting.key_for

    def recording_key_for(self: SandboxRouting, task: Task) -> str:
        key = key_for(self, task)
        asked.append((task.risk, key))
        return key

    monkeypatch.setattr("roost.train.run.create_sandbox", recording)
    monkeypatch.setattr(SandboxRouting, "key_for", recording_key_for)
    path = _tasks_file(tmp_path / "tasks.jsonl")
    tasks = msgspec.structs.replace(
        tiny_config.tasks,
        source="jsonl",
        path=str(path),
        levels=[1],
        demo_levels=[1],
        heldout_percent=40,
    )
    episode = msgspec.structs.replace(tiny_config.episode, relabel="off")
    sandbox = msgspec.structs.replace(tiny_config.sandbox, isolation={"high": "docker"})
    config = msgspec.structs.replace(tiny_config, tasks=tasks, episode=episode, sandbox=sandbox)
    from roost.train.run import train

    summary: dict[str, Any] = await train(config, tmp_path / "run")
    assert summary["requested"] == summary["scored"] + summary["failed"] + summary["cancelled"]
    assert summary["failed"] == 0
    # Both backends were started (the preflight checks each before any training).
    assert ("python", "process") in made
    assert ("python", "docker") in made
    assert set(made) == {("python", "process"), ("python", "docker")}
    # Rollouts and held-out checks asked for their task's key: high-risk tasks the docker one.
    assert {key for risk, key in asked if risk == "high"} == {"python@docker"}
    assert {key for risk, key in asked if risk == "low"} == {"python"}
