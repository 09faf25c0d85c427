"""Task files load, and malformed ones are rejected with the file, the line and the field."""

from __future__ import annotations

import json
from pathlib import Path

import msgspec
import pytest

from tasks import TaskFormatError, TestCase, load_tasks, read_tasks

EXAMPLES = Path(__file__).parents[2] / "examples" / "tasks"

GOOD = {"id": "t1", "prompt": "p", "entry_point": "f", "tests": [{"call": "f(1)", "expected": "2"}]}


def write_jsonl(tmp_path: Path, rows: list[object]) -> Path:
    path = tmp_path / "tasks.jsonl"
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows))
    return path


def test_the_example_files_load() -> None:
    humaneval = load_tasks(EXAMPLES / "humaneval.jsonl")
    assert [t.id for t in humaneval][:2] == ["HumanEval/0", "HumanEval/2"]
    first = humaneval[0]
    assert first.entry_point == "has_close_elements"
    assert first.prefix == first.prompt  # the agent writes the body
    assert first.tests[0].call.startswith("candidate(")
    assert first.tests[0].expected == "True"
    assert "weak-channel" in humaneval[1].tags  # `abs(candidate(...) - x) < 1e-6` stays a check
    mbpp = humaneval[-1]
    assert mbpp.id == "mbpp/mbpp-style-1"
    assert mbpp.entry_point == "similar_elements"
    basics = load_tasks(EXAMPLES / "basics.toml")
    assert [t.id for t in basics] == ["basics/clamp", "basics/count-vowels"]
    assert len(basics[0].tests) == 3


def test_invalid_json_names_the_line(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path, [GOOD, "{not json"])
    with pytest.raises(TaskFormatError) as info:
        load_tasks(path)
    assert info.value.line == 2
    assert info.value.path == str(path)
    assert str(info.value).startswith(f"{path}:2: invalid JSON")


def test_a_wrong_field_names_the_line_and_the_field(tmp_path: Path) -> None:
    bad = {**GOOD, "id": "t2", "tests": [{"call": 3, "expected": "2"}]}
    path = write_jsonl(tmp_path, [GOOD, GOOD | {"id": "t3"}, bad])
    result = read_tasks(path)
    assert [t.id for t in result.tasks] == ["t1", "t3"]
    [(task_id, error)] = result.invalid
    assert task_id == "t2"
    assert (error.line, error.field) == (3, "tests[0].call")
    assert str(error) == f"{path}:3: tests[0].call: Expected `str`, got `int`"


@pytest.mark.parametrize(
    ("change", "field", "words"),
    [
        ({"level": 0}, "level", "must be >= 1"),
        ({"entry_point": "not an identifier"}, "task", "not a Python identifier"),
        ({"tests": []}, "task", "at least one test"),
        ({"colour": "red"}, "colour", "unknown field"),
        ({"prompt": None}, "prompt", "Expected `str`, got `null`"),
        ({"tests": [{"call": "f(1)"}]}, "task", "needs `call` and `expected`"),
        ({"files": {"../escape": "x"}}, "task", "relative path inside the sandbox"),
    ],
)
def test_each_kind_of_bad_field_is_named(
    tmp_path: Path, change: dict[str, object], field: str, words: str
) -> None:
    path = write_jsonl(tmp_path, [GOOD | {"id": "a"}, GOOD | change])
    with pytest.raises(TaskFormatError) as info:
        load_tasks(path)
    assert info.value.line == 2
    assert words in str(info.value)
    if field != "task":
        assert info.value.field == field


@pytest.mark.parametrize(
    ("test", "words"),
    [
        # Each would load and then fail every answer: scored 0 as the agent's SyntaxError
        # (`call`, `check`), or a harness crash, an evaluation failure (`expected`).
        ({"call": "f(1", "expected": "2"}, "call: not valid Python: '(' was never closed"),
        ({"call": "f(1)", "expected": "2 +"}, "expected: not valid Python: invalid syntax"),
        ({"call": "f(1)", "expected": "two"}, "expected: name 'two' is not defined"),
        ({"check": "assert candidate(1) ==\n"}, "check: not valid Python: invalid syntax"),
        (
            {"check": "x = 1\nreturn x\n"},
            "check: not valid Python: 'return' outside function (line 2)",
        ),
    ],
)
def test_a_test_that_is_not_valid_python_is_rejected_at_load(
    tmp_path: Path, test: dict[str, str], words: str
) -> None:
    path = write_jsonl(tmp_path, [GOOD, GOOD | {"id": "t2", "tests": [GOOD["tests"][0], test]}])
    with pytest.raises(TaskFormatError) as info:
        load_tasks(path)
    assert (info.value.line, info.value.field) == (2, "tests[1]")
    assert words in info.value.message


def test_a_test_that_is_not_valid_python_names_its_toml_line(tmp_path: Path) -> None:
    path = tmp_path / "t.toml"
    path.write_text(TOML_OK.replace('level = "hard"', "").replace('call = "f(1)"', 'call = "f(1"'))
    with pytest.raises(TaskFormatError) as info:
        load_tasks(path)
    assert info.value.line == 7  # the first `[[task.tests]]`
    assert str(info.value) == f"{path}:7: tests[0]: call: not valid Python: '(' was never closed"


@pytest.mark.parametrize(
    "fields",
    [
        {"call": "  f(1)", "expected": " 2"},  # the harness `eval`s both: leading blanks drop
        {"call": "f(1)", "expected": "[i * 2 for i in range(3)]"},  # names it binds itself
        {"call": "f(1)", "expected": "(lambda a, *b: a)(2)"},
        {"call": "f(1)", "expected": "frozenset({float('inf'), -1j})"},  # builtins
        {"check": "def g():\n    return 1\nassert candidate(g()) == 2\n"},
    ],
)
def test_tests_that_the_harness_can_run_still_load(fields: dict[str, str]) -> None:
    assert msgspec.structs.asdict(TestCase(**fields)).items() >= fields.items()


def test_duplicate_ids_are_rejected_with_both_lines(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path, [GOOD, GOOD])
    with pytest.raises(TaskFormatError, match=r":2: id: duplicate id 't1' \(first at line 1\)"):
        load_tasks(path)


def test_a_broken_humaneval_test_is_rejected(tmp_path: Path) -> None:
    row = {"task_id": "H/1", "prompt": "def f(x):\n", "entry_point": "f", "test": "def chk(:"}
    path = write_jsonl(tmp_path, [row])
    with pytest.raises(TaskFormatError) as info:
        load_tasks(path)
    assert (info.value.line, info.value.field) == (1, "test")
    assert "not valid Python" in str(info.value)


TOML_OK = """
[[task]]
id = "a"
prompt = "p"
entry_point = "f"

[[task.tests]]
call = "f(1)"
expected = "1"

[[task]]
id = "b"
prompt = "p"
entry_point = "f"
level = "hard"

[[task.tests]]
call = "f(1)"
expected = "1"
"""


def test_toml_field_errors_name_the_line_of_the_field(tmp_path: Path) -> None:
    path = tmp_path / "t.toml"
    path.write_text(TOML_OK)
    with pytest.raises(TaskFormatError) as info:
        load_tasks(path)
    assert (info.value.line, info.value.field) == (15, "level")
    assert str(info.value) == f"{path}:15: level: Expected `int`, got `str`"


def test_toml_syntax_errors_name_the_line(tmp_path: Path) -> None:
    path = tmp_path / "t.toml"
    path.write_text('[[task]]\nid = "a"\nprompt = \n')
    with pytest.raises(TaskFormatError) as info:
        load_tasks(path)
    assert info.value.line == 3


def test_unknown_formats_and_missing_files_are_clear(tmp_path: Path) -> None:
    with pytest.raises(TaskFormatError, match=r"expected a \.toml or \.jsonl file"):
        load_tasks(tmp_path / "x.csv")
    with pytest.raises(TaskFormatError, match="cannot read"):
        load_tasks(tmp_path / "missing.jsonl")
