"""`roost tasks check`: weak, flaky and invalid tasks are found, and the JSON has its keys."""

from __future__ import annotations

import json
from pathlib import Path

import msgspec
from click.testing import CliRunner

from roost.cli import cli
from tasks import Task, TestCase
from tests.tasks._helpers import ADD_ONE

EXAMPLES = Path(__file__).parents[2] / "examples" / "tasks"

BROKEN = msgspec.structs.replace(ADD_ONE, id="broken", canonical_solution="    return x - 1\n")
FLAKY = Task(
    id="flaky",
    prompt="",
    entry_point="f",
    tests=[TestCase(call="f()", expected="0")],
    # Each run sees a counter left by the one before: pass, fail, pass, ...
    canonical_solution=(
        "import os\n"
        "n = int(open('n').read()) if os.path.exists('n') else 0\n"
        "open('n', 'w').write(str(n + 1))\n"
        "def f():\n"
        "    return n % 2\n"
    ),
)


def write(path: Path, tasks: list[Task], extra: str = "") -> Path:
    path.write_bytes(b"".join(msgspec.json.encode(t) + b"\n" for t in tasks) + extra.encode())
    return path


def test_check_reports_weak_flaky_invalid_and_the_json_keys(tmp_path: Path) -> None:
    weak = msgspec.structs.replace(
        ADD_ONE,
        id="weak",
        tests=[TestCase(call="f(5)", expected="6")],
        canonical_solution="    return x + 1 if x > 3 else 0\n",
    )
    path = write(tmp_path / "t.jsonl", [ADD_ONE, weak, BROKEN, FLAKY], '{"id": 3}\n')
    out = tmp_path / "report.json"
    result = CliRunner().invoke(
        cli, ["tasks", "check", str(path), "--json", str(out), "--workers", "2", "--repeats", "3"]
    )
    assert result.exit_code == 1, result.output
    report = json.loads(out.read_text())
    for key in (
        "tasks",
        "canonical_passed",
        "mutants",
        "mutants_failed",
        "weak",
        "flaky",
        "invalid",
        "records",
        "seconds_per_100_tasks",
    ):
        assert key in report
    assert report["tasks"] == 5
    assert report["weak"] == ["weak"]  # `x > 3` -> `x > 4` is never probed by f(5)
    assert report["flaky"] == ["flaky"]
    invalid = {entry["id"]: entry["reason"] for entry in report["invalid"]}
    assert set(invalid) == {"3", "broken", "flaky"}
    assert ":5: id: Expected `str`, got `int`" in invalid["3"]
    assert "canonical solution fails" in invalid["broken"]
    records = {r["id"]: r for r in report["records"]}
    assert records["add-one"]["mutants"] == records["add-one"]["mutants_failed"] > 0
    assert records["weak"]["surviving"] == ["changed_constant"]
    assert "weak weak: survived by" in result.output


def test_the_example_files_check_clean() -> None:
    for name in ("humaneval.jsonl", "basics.toml"):
        result = CliRunner().invoke(cli, ["tasks", "check", str(EXAMPLES / name), "--workers", "2"])
        assert result.exit_code == 0, result.output
        assert "invalid 0" in result.output


def test_generate_writes_a_checkable_procedural_file(tmp_path: Path) -> None:
    out = tmp_path / "gen.jsonl"
    result = CliRunner().invoke(
        cli, ["tasks", "generate", str(out), "--count", "6", "--levels", "2-4", "--seed", "5"]
    )
    assert result.exit_code == 0, result.output
    assert len(out.read_text().splitlines()) == 6
    bad = CliRunner().invoke(cli, ["tasks", "generate", str(out), "--levels", "0-9"])
    assert bad.exit_code != 0
    assert "levels must lie in" in bad.output


def test_a_json_path_in_a_missing_directory_is_refused_before_the_check(tmp_path: Path) -> None:
    path = write(tmp_path / "t.jsonl", [ADD_ONE])
    out = tmp_path / "no" / "report.json"
    result = CliRunner().invoke(cli, ["tasks", "check", str(path), "--json", str(out)])
    assert result.exit_code == 2, result.output
    assert "no such directory" in result.output
    assert "checked" not in result.output  # refused before any task ran
