"""Task files: TOML (`[[task]]` tables) and JSONL (one task per line; the HumanEval and MBPP
shapes load as they are). Every error names the file, the line and the field.
"""

from __future__ import annotations

import dataclasses
import json
import re
import tomllib
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import msgspec

from tasks._humaneval import from_humaneval, from_mbpp, is_humaneval, is_mbpp
from tasks._spec import Task

__all__ = ["LoadResult", "TaskFormatError", "dump_jsonl", "load_tasks", "read_tasks"]

_FIELD_RE = re.compile(r"at `\$\.?([^`]*)`")
_NAMED_RE = re.compile(r"^([a-z_]+): ")
_UNKNOWN_RE = re.compile(r"unknown field `([^`]+)`")
_HEADER_RE = re.compile(r"^\s*\[\[\s*task\s*\]\]\s*(#.*)?$")


class TaskFormatError(ValueError):
    """A task file is malformed. `path`, `line` (1-based, 0 if unknown) and `field` say where."""

    def __init__(self, path: str, line: int, field: str, message: str) -> None:
        self.path, self.line, self.field, self.message = path, line, field, message
        where = f"{path}:{line}" if line else path
        super().__init__(f"{where}: {field}: {message}" if field else f"{where}: {message}")


@dataclasses.dataclass(frozen=True)
class LoadResult:
    """Every valid task of a file, and an error for each invalid one (`task_id` when known)."""

    tasks: list[Task]
    invalid: list[tuple[str, TaskFormatError]]


def load_tasks(path: str | Path) -> list[Task]:
    """The tasks of a `.toml` or `.jsonl` file. :raises TaskFormatError: at the first bad task."""
    result = read_tasks(path)
    if result.invalid:
        raise result.invalid[0][1]
    return result.tasks


def read_tasks(path: str | Path) -> LoadResult:
    """Like `load_tasks`, but keeps going past bad tasks and reports them all.

    :raises TaskFormatError: when the file cannot be read or parsed at all.
    """
    name = str(path)
    if not name.endswith((".toml", ".jsonl", ".json")):
        raise TaskFormatError(name, 0, "", "unknown format: expected a .toml or .jsonl file")
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise TaskFormatError(name, 0, "", f"cannot read: {exc}") from None
    reader = _toml_entries if name.endswith(".toml") else _jsonl_entries
    entries = reader(name, text)
    tasks: list[Task] = []
    invalid: list[tuple[str, TaskFormatError]] = []
    seen: dict[str, int] = {}
    for line, raw, field_lines in entries:
        if isinstance(raw, TaskFormatError):
            invalid.append((f"line {line}", raw))
            continue
        label = (
            str(raw.get("id", raw.get("task_id", f"line {line}"))) if isinstance(raw, dict) else ""
        )
        try:
            task = _to_task(name, line, raw, field_lines)
        except TaskFormatError as exc:
            invalid.append((label or f"line {line}", exc))
            continue
        if task.id in seen:
            err = TaskFormatError(
                name, line, "id", f"duplicate id {task.id!r} (first at line {seen[task.id]})"
            )
            invalid.append((task.id, err))
            continue
        seen[task.id] = line
        tasks.append(task)
    return LoadResult(tasks, invalid)


def _to_task(path: str, line: int, raw: Any, field_lines: dict[str, int]) -> Task:
    if not isinstance(raw, dict):
        raise TaskFormatError(path, line, "", f"expected a table/object, got {type(raw).__name__}")
    try:
        if is_humaneval(raw):
            return from_humaneval(raw)
        if is_mbpp(raw):
            return from_mbpp(raw)
        return msgspec.convert(raw, Task)
    except msgspec.ValidationError as exc:
        message = str(exc)
        match = _FIELD_RE.search(message)
        field = match.group(1) if match else ""
        named = _NAMED_RE.match(message)
        if not field and named:  # a check in __post_init__ names its field first
            field, message = named.group(1), message[named.end() :]
        unknown = _UNKNOWN_RE.search(message)
        if not field and unknown:
            field = unknown.group(1)
        top = re.split(r"[.\[]", field, maxsplit=1)[0]
        message = _FIELD_RE.sub("", message).rstrip(" -")
        return _raise(path, field_lines.get(top, line), field or "task", message)
    except (ValueError, SyntaxError, KeyError, TypeError) as exc:
        return _raise(path, line, getattr(exc, "field", "task"), str(exc))
    except (RecursionError, MemoryError):
        # `ast.parse`/`ast.unparse` of the HumanEval/MBPP test code recurse per nesting level:
        # a 500-term `1 + 1 + ...` or deeply nested call is refused, not a crash.
        return _raise(path, line, "task", "test code nested too deeply to parse")


def _raise(path: str, line: int, field: str, message: str) -> Task:
    raise TaskFormatError(path, line, field, message)


def _toml_entries(path: str, text: str) -> Iterable[tuple[int, Any, dict[str, int]]]:
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        match = re.search(r"line (\d+)", str(exc))
        raise TaskFormatError(path, int(match.group(1)) if match else 0, "", str(exc)) from None
    except RecursionError:  # tomllib recurses once per level of `[[[...`
        raise TaskFormatError(path, 0, "", "arrays or tables nested too deeply") from None
    unknown = sorted(set(doc) - {"task"})
    if unknown:
        raise TaskFormatError(path, 0, unknown[0], "unknown top-level key; tasks go in [[task]]")
    raw = doc.get("task", [])
    if not isinstance(raw, list):
        raise TaskFormatError(path, 0, "task", "expected an array of tables: [[task]]")
    lines = text.splitlines()
    headers = [i + 1 for i, row in enumerate(lines) if _HEADER_RE.match(row)]
    headers += [0] * (len(raw) - len(headers))
    for index, entry in enumerate(raw):
        start = headers[index]
        end = headers[index + 1] if index + 1 < len(headers) and headers[index + 1] else len(lines)
        field_lines: dict[str, int] = {}
        for number in range(start, end):
            key = re.match(r"^\s*([A-Za-z_][A-Za-z0-9_]*)\s*=", lines[number])
            if key and key.group(1) not in field_lines:
                field_lines[key.group(1)] = number + 1
            key = re.match(r"^\s*\[\[?\s*task\.([A-Za-z_]+)", lines[number])
            if key and key.group(1) not in field_lines:
                field_lines[key.group(1)] = number + 1
        yield start, entry, field_lines


def _jsonl_entries(path: str, text: str) -> Iterable[tuple[int, Any, dict[str, int]]]:
    for number, row in enumerate(text.splitlines(), start=1):
        if not row.strip():
            continue
        try:
            doc = json.loads(row)
        except json.JSONDecodeError as exc:
            # One broken line must not hide the rest of the file from `tasks check`.
            doc = TaskFormatError(path, number, "", f"invalid JSON: {exc.msg} (column {exc.colno})")
        except RecursionError:  # json recurses once per level of `[[[...`
            doc = TaskFormatError(path, number, "", "invalid JSON: nested too deeply")
        yield number, doc, {}


def dump_jsonl(tasks: Iterable[Task], path: str | Path) -> int:
    """Write `tasks` as JSONL (the native shape); returns how many."""
    count = 0
    with Path(path).open("wb") as out:
        for task in tasks:
            out.write(msgspec.json.encode(task) + b"\n")
            count += 1
    return count
