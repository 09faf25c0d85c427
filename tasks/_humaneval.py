"""The HumanEval and MBPP shapes of a code task, converted to `Task`.

Their tests are assertions meant to run next to the solution, where the solution could subvert
them. Each `assert <call> == <literal>` becomes a call/expected test judged out of process (see
`tasks/_harness.py`); anything else is kept as one `check` test and the task is tagged
`weak-channel`, so `tasks check` and the docs can say which tasks rely on it. So is a call that
needs a name the child evaluating it does not have (the test module's imports and assignments,
a `check` parameter other than `candidate`).
"""

from __future__ import annotations

import ast
import builtins
from collections.abc import Set
from typing import Any

import msgspec

from tasks._spec import Task, TestCase

__all__ = ["from_humaneval", "from_mbpp", "is_humaneval", "is_mbpp"]


class ShapeError(ValueError):
    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field


def is_humaneval(raw: dict[str, Any]) -> bool:
    return "task_id" in raw and "entry_point" in raw and "test" in raw


def is_mbpp(raw: dict[str, Any]) -> bool:
    return "task_id" in raw and "test_list" in raw


def _text(raw: dict[str, Any], field: str, *, default: str | None = None) -> str:
    value = raw.get(field, default)
    if not isinstance(value, str):
        raise ShapeError(field, f"expected a string, got {type(value).__name__}")
    return value


def _literal(node: ast.expr) -> str | None:
    source = ast.unparse(node)
    try:
        ast.literal_eval(source)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return None
    return source


def _as_call(stmt: ast.stmt, unavailable: Set[str]) -> TestCase | None:
    """A call/expected test from `assert CALL == LITERAL`, or None.

    None too when CALL uses a name in `unavailable`: the child that evaluates it has only the
    solution's names and `candidate`.
    """
    if not isinstance(stmt, ast.Assert) or not isinstance(stmt.test, ast.Compare):
        return None
    cmp = stmt.test
    if len(cmp.ops) != 1 or not isinstance(cmp.ops[0], ast.Eq):
        return None
    expected = _literal(cmp.comparators[0])
    if expected is None or _literal(cmp.left) is not None:
        return None
    if any(isinstance(n, ast.Name) and n.id in unavailable for n in ast.walk(cmp.left)):
        return None
    return TestCase(call=ast.unparse(cmp.left), expected=expected)


def _convert(
    statements: list[ast.stmt], unavailable: Set[str] = frozenset()
) -> list[TestCase] | None:
    """Call/expected tests for every statement, or None when one cannot be converted."""
    tests = []
    for stmt in statements:
        if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant):
            continue  # a docstring
        if isinstance(stmt, ast.Pass):
            continue
        test = _as_call(stmt, unavailable)
        if test is None:
            return None
        tests.append(test)
    return tests or None


def _unavailable(module: ast.Module, check: ast.FunctionDef) -> set[str] | None:
    """Names a converted call could use that the child lacks: what the test module binds at
    its top (imports, assignments, `check`, ...) and `check`'s parameters but `candidate`.
    None when that cannot be known (`from m import *`).
    """
    names: set[str] = set()
    for stmt in module.body:
        if isinstance(stmt, ast.Import | ast.ImportFrom):
            for alias in stmt.names:
                if alias.name == "*":
                    return None
                names.add(alias.asname or alias.name.split(".")[0])
        elif isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(stmt.name)
        else:  # assignment targets and `:=`; over-counting only costs a conversion
            names.update(
                n.id
                for n in ast.walk(stmt)
                if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)
            )
    args = check.args
    params = [*args.posonlyargs, *args.args, *args.kwonlyargs, args.vararg, args.kwarg]
    names.update(a.arg for a in params if a is not None and a.arg != "candidate")
    return names


def _parse(field: str, source: str) -> ast.Module:
    try:
        return ast.parse(source)
    except SyntaxError as exc:
        raise ShapeError(field, f"not valid Python: {exc.msg} (line {exc.lineno})") from None


def from_humaneval(raw: dict[str, Any]) -> Task:
    """A `Task` from {task_id, prompt, canonical_solution, test, entry_point}.

    :raises ValueError: (with `.field`) naming the field that is wrong.
    """
    task_id, prompt = str(raw["task_id"]), _text(raw, "prompt")
    entry, test = _text(raw, "entry_point"), _text(raw, "test")
    module = _parse("test", test)
    check = next(
        (n for n in module.body if isinstance(n, ast.FunctionDef) and n.name == "check"), None
    )
    if check is None:
        raise ShapeError("test", "no `def check(candidate)` in the test code")
    others = [n for n in module.body if n is not check]
    only_metadata = all(
        isinstance(n, ast.Assign | ast.Expr | ast.Import | ast.ImportFrom) for n in others
    )
    # The child evaluates the converted calls with the solution's names and `candidate`, and
    # never runs the test module: a call that uses its imports or assignments (`math.pi`, `K`)
    # or a parameter of `check` not named `candidate` keeps the module whole as one check.
    unavailable = _unavailable(module, check)
    tests = _convert(check.body, unavailable) if only_metadata and unavailable is not None else None
    tags = ["humaneval"]
    if tests is None:
        tests = [_check_test("test", f"{test}\ncheck(candidate)\n")]
        tags.append("weak-channel")
    return _build(raw, task_id, prompt, prompt, entry, tests, tags, raw.get("canonical_solution"))


def from_mbpp(raw: dict[str, Any]) -> Task:
    """A `Task` from {task_id, text, code, test_list[, test_setup_code]}."""
    task_id, text = f"mbpp/{raw['task_id']}", _text(raw, "text")
    code = _text(raw, "code")
    setup = _text(raw, "test_setup_code", default="")
    asserts = raw["test_list"]
    if not isinstance(asserts, list) or not asserts or not all(isinstance(a, str) for a in asserts):
        raise ShapeError("test_list", "expected a non-empty list of assert statements")
    statements = [stmt for source in asserts for stmt in _parse("test_list", source).body]
    if not statements:  # only blank or comment lines
        raise ShapeError("test_list", "the tests contain no statements")
    entry = next(
        (
            node.func.id
            for node in ast.walk(statements[0])
            if isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and not hasattr(builtins, node.func.id)
        ),
        None,
    )
    if entry is None:
        raise ShapeError("test_list", "the first test calls no function of the solution")
    tests = None if setup.strip() else _convert(statements)
    tags = ["mbpp"]
    if tests is None:
        if setup.strip():
            _check_test("test_setup_code", setup)  # its own errors named as its own
        tests = [_check_test("test_list", setup + "\n" + "\n".join(asserts) + "\n")]
        tags.append("weak-channel")
    prompt = f"{text}\nYour code should pass: {asserts[0]}\n"
    return _build(raw, task_id, prompt, "", entry, tests, tags, code)


def _check_test(field: str, source: str) -> TestCase:
    """The test code kept whole as one `check`; a ValueError names `field` if it cannot run."""
    try:
        return TestCase(check=source, name="check")
    except ValueError as exc:  # `TestCase` compiles it: `return` outside a function, ...
        raise ShapeError(field, str(exc).removeprefix("check: ")) from None


def _build(
    raw: dict[str, Any],
    task_id: str,
    prompt: str,
    prefix: str,
    entry: str,
    tests: list[TestCase],
    tags: list[str],
    canonical: Any,
) -> Task:
    if canonical is not None and not isinstance(canonical, str):
        raise ShapeError("canonical_solution", "expected a string")
    extra: dict[str, Any] = {
        k: raw[k] for k in ("level", "group", "risk", "timeout_s", "runtime") if k in raw
    }
    return msgspec.convert(
        {
            "id": str(task_id),
            "prompt": prompt,
            "prefix": prefix,
            "entry_point": entry,
            "tests": [msgspec.to_builtins(t) for t in tests],
            "tags": tags,
            "canonical_solution": canonical,
            **extra,
        },
        Task,
    )
