"""Fuzzing the task loaders: TOML, native JSONL, and the HumanEval and MBPP shapes.

Every outcome is a `LoadResult` or a `TaskFormatError`; every invalid task is a
`TaskFormatError` that names the file, the line (JSONL: the line of the object; TOML: the line of
the field or the `[[task]]` header) and the field. Nothing else escapes and nothing hangs.
"""

from __future__ import annotations

import json
from pathlib import Path

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

from tasks import Task, TaskFormatError, read_tasks
from tests.reliability.conftest import FUZZ

EXAMPLES = Path(__file__).parents[2] / "examples" / "tasks"
HUMANEVAL = [json.loads(row) for row in (EXAMPLES / "humaneval.jsonl").read_text().splitlines()]
BASICS = (EXAMPLES / "basics.toml").read_text()

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner),
    max_leaves=8,
)


def _read(tmp: Path, name: str, content: bytes) -> object:
    path = tmp / name
    path.write_bytes(content)
    try:
        result = read_tasks(path)
    except TaskFormatError as exc:
        error = exc
    else:
        error = None
    if error is not None:
        assert error.path == str(path)
        assert str(path) in str(error)
        return error
    for task in result.tasks:
        assert isinstance(task, Task)
        assert msgspec.convert(msgspec.to_builtins(task), Task) == task  # valid all the way
    for _, error in result.invalid:
        assert isinstance(error, TaskFormatError)
        assert error.path == str(path)
    return result


@FUZZ
@given(content=st.binary(max_size=300), suffix=st.sampled_from([".toml", ".jsonl"]))
def test_fuzz_tasks_file_of_random_bytes_loads_or_names_the_file(
    tmp_path_factory: pytest.TempPathFactory, content: bytes, suffix: str
) -> None:
    _read(tmp_path_factory.mktemp("t"), f"tasks{suffix}", content)


@FUZZ
@given(rows=st.lists(json_values, max_size=6))
def test_fuzz_tasks_jsonl_of_any_json_names_each_bad_line(
    tmp_path_factory: pytest.TempPathFactory, rows: list[object]
) -> None:
    tmp = tmp_path_factory.mktemp("t")
    result = _read(tmp, "tasks.jsonl", "\n".join(json.dumps(r) for r in rows).encode())
    assert not isinstance(result, TaskFormatError)  # JSONL errors are per line, never fatal
    for _, error in result.invalid:  # type: ignore[attr-defined]
        assert 1 <= error.line <= len(rows)
        assert f":{error.line}:" in str(error)


@FUZZ
@given(
    index=st.integers(0, len(HUMANEVAL) - 1),
    field=st.sampled_from(["task_id", "prompt", "entry_point", "test", "canonical_solution"]),
    value=json_values,
)
def test_fuzz_tasks_humaneval_with_one_field_replaced_loads_or_names_it(
    tmp_path_factory: pytest.TempPathFactory, index: int, field: str, value: object
) -> None:
    row = {**HUMANEVAL[index], field: value}
    tmp = tmp_path_factory.mktemp("t")
    result = _read(tmp, "he.jsonl", (json.dumps(row) + "\n").encode())
    assert not isinstance(result, TaskFormatError)
    for _, error in result.invalid:  # type: ignore[attr-defined]
        assert error.line == 1
        assert error.field  # which field is wrong is always said


@FUZZ
@given(test_code=st.text(max_size=200), entry=st.text(max_size=12))
def test_fuzz_tasks_humaneval_with_any_test_code_loads_or_names_the_field(
    tmp_path_factory: pytest.TempPathFactory, test_code: str, entry: str
) -> None:
    row = {**HUMANEVAL[0], "test": test_code, "entry_point": entry}
    tmp = tmp_path_factory.mktemp("t")
    result = _read(tmp, "he.jsonl", (json.dumps(row) + "\n").encode())
    assert not isinstance(result, TaskFormatError)
    for _, error in result.invalid:  # type: ignore[attr-defined]
        assert error.field in {"test", "entry_point", "task", "id"}


@FUZZ
@given(asserts=st.lists(st.text(max_size=40), max_size=3), setup=st.text(max_size=20))
def test_fuzz_tasks_mbpp_with_any_asserts_loads_or_names_the_field(
    tmp_path_factory: pytest.TempPathFactory, asserts: list[str], setup: str
) -> None:
    row = {"task_id": 7, "text": "t", "code": "def f(x): return x", "test_list": asserts}
    row["test_setup_code"] = setup
    tmp = tmp_path_factory.mktemp("t")
    result = _read(tmp, "mbpp.jsonl", (json.dumps(row) + "\n").encode())
    assert not isinstance(result, TaskFormatError)


def _mutate(text: str, start: int, length: int, insert: str) -> str:
    start %= len(text) + 1
    return text[:start] + insert + text[min(len(text), start + length) :]


@FUZZ
@given(
    start=st.integers(0, 5000),
    length=st.integers(0, 30),
    insert=st.text(alphabet="[]{}=\"'.,0123456789-_aeiltkxs \n#\\", max_size=10),
)
def test_fuzz_tasks_mutated_toml_loads_or_names_file_and_line(
    tmp_path_factory: pytest.TempPathFactory, start: int, length: int, insert: str
) -> None:
    text = _mutate(BASICS, start, length, insert)
    result = _read(tmp_path_factory.mktemp("t"), "basics.toml", text.encode())
    lines = text.count("\n") + 1
    errors = [result] if isinstance(result, TaskFormatError) else result.invalid  # type: ignore[attr-defined]
    for item in errors:
        error = item if isinstance(item, TaskFormatError) else item[1]
        assert 0 <= error.line <= lines


@pytest.mark.parametrize(
    ("name", "content", "field", "expected"),
    [
        ("deep.jsonl", "[" * 100_000, "", "nested too deeply"),
        ("deep.toml", "x = " + "[" * 5000, "", "nested too deeply"),
        (
            "mbpp.jsonl",
            json.dumps({"task_id": 1, "text": "t", "code": "", "test_list": ["# only a comment"]}),
            "test_list",
            "no statements",
        ),
        (
            "he.jsonl",
            json.dumps(
                {**HUMANEVAL[0], "test": "def check(c):\n    assert c(1) == " + "-" * 5000 + "1"}
            ),
            "task",
            "nested too deeply",
        ),
        (
            "he.jsonl",
            json.dumps(
                {**HUMANEVAL[0], "test": "def check(c):\n    assert c(" + "1+" * 600 + "1) == 1"}
            ),
            "task",
            "nested too deeply",
        ),
        (
            "t.jsonl",
            json.dumps({**HUMANEVAL[0], "entry_point": "f\n"}),
            "entry_point",
            "identifier",
        ),
    ],
)
def test_fuzz_tasks_corpus_each_gets_a_clear_error(
    tmp_path: Path, name: str, content: str, field: str, expected: str
) -> None:
    path = tmp_path / name
    path.write_text(content)
    try:
        result = read_tasks(path)
    except TaskFormatError as exc:
        error = exc
    else:
        assert len(result.invalid) == 1
        error = result.invalid[0][1]
    assert error.field == field
    assert expected in error.message


@pytest.mark.parametrize(
    ("fields", "field"),
    [
        ({"id": "a\n"}, "id"),
        ({"solution_file": "s\n.py"}, "solution_file"),
        ({"solution_file": "solution.txt"}, "solution_file"),
        ({"files": {"": "x"}}, "files"),
        ({"files": {"a\x00b": "x"}}, "files"),
        ({"files": {"./solution.py": "x"}}, "files"),
        ({"files": {"d/../../x": "x"}}, "files"),
        ({"files": {"/etc/x": "x"}}, "files"),
    ],
)
def test_fuzz_tasks_spec_refuses_names_that_are_not_what_they_seem(
    tmp_path: Path, fields: dict[str, object], field: str
) -> None:
    row = {"id": "t", "prompt": "p", "entry_point": "f", "tests": [{"check": "pass"}], **fields}
    path = tmp_path / "t.jsonl"
    path.write_text(json.dumps(row))
    result = read_tasks(path)
    assert not result.tasks
    assert result.invalid[0][1].field == field
