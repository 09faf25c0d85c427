"""What a task is (`Task`, `TestCase`) and what verifying a solution says (`Verdict`).

All frozen msgspec structs: a task file decodes straight into them (with errors naming the
field), and a verdict can go to the run log or over a wire unchanged.
"""

from __future__ import annotations

import ast
import builtins
import functools
import posixpath
import re
from typing import Literal

import msgspec

__all__ = ["FailureKind", "Risk", "Task", "TestCase", "TestOutcome", "TestStatus", "Verdict"]

Risk = Literal["low", "medium", "high"]
VerifierKind = Literal["tests"]
FailureKind = Literal["agent", "infrastructure", "evaluation"]
TestStatus = Literal["passed", "failed", "error", "timeout", "crash"]

# Matched with `fullmatch`: `match` with `$` would accept a trailing newline ("f\n" as an
# entry point, "s\n.py" as a solution file).
_ID_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_./:-]*")
_IDENT_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


class TestCase(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """One hidden test.

    Either `call` and `expected`: `call` is an expression using the entry point, evaluated in a
    process that imported the solution; only its value (as a Python literal) comes back, and the
    harness compares it with `expected`, which it evaluates itself. The solution never sees
    `expected`, so it cannot forge a pass. Or `check`: statements run next to the solution (with
    `candidate` bound to the entry point) that pass when they raise nothing; code that shares a
    process with the solution can be subverted by it, so prefer call/expected (the HumanEval
    loader converts `assert candidate(...) == value` lines into that form).

    :raises ValueError: naming the field, when `call`, `expected` or `check` does not compile,
        or `expected` uses a name other than a builtin's (the harness evaluates it alone).
    """

    __test__ = False  # not a pytest class

    call: str = ""
    expected: str = ""
    check: str = ""
    name: str = ""

    def __post_init__(self) -> None:
        if self.check:
            if self.call or self.expected:
                raise ValueError("a test has either `check` or `call` + `expected`, not both")
            fields = {"check": self.check}
        elif not (self.call and self.expected):
            raise ValueError("a test needs `call` and `expected` (or `check`)")
        else:
            fields = {"call": self.call, "expected": self.expected}
        # Checked at load time: a test that is not Python would otherwise score every right
        # answer 0 (a bad `call` or `check`) or crash the harness on every one (`expected`).
        for field, source in fields.items():
            problem = _problem(field, source)
            if problem is not None:
                raise ValueError(f"{field}: {problem}")


# Cached: generated tasks repeat the same calls and values (`f(3)`, `9`) thousands of times.
@functools.lru_cache(maxsize=4096)
def _problem(field: str, source: str) -> str | None:
    """Why `source` cannot run as the test's `field` in the harness, or None if it can.

    `call` and `expected` are `eval`ed (which drops leading spaces and tabs), `check` is
    `exec`ed; compiling adds the checks the parser leaves out (`return` outside a function).
    `expected` is evaluated by the harness alone (`eval(expected, {})`), so it may use
    builtins and the names it binds itself (a comprehension's, a lambda's), nothing else.
    """
    name = f"<{field}>"
    try:
        tree: ast.Module | ast.Expression
        if field == "check":
            tree = ast.parse(source, name, "exec")
        else:
            source = source.lstrip(" \t")
            tree = ast.parse(source, name, "eval")
        compile(tree, name, "exec" if field == "check" else "eval", dont_inherit=True)
    except SyntaxError as exc:
        where = f" (line {exc.lineno})" if exc.lineno and "\n" in source.rstrip("\n") else ""
        return f"not valid Python: {exc.msg}{where}"
    except ValueError as exc:  # null bytes, on some Python versions
        return f"not valid Python: {exc}"
    except (RecursionError, MemoryError):
        return "nested too deeply to compile"
    if field != "expected":
        return None
    nodes = list(ast.walk(tree))
    bound = {n.id for n in nodes if isinstance(n, ast.Name) and not isinstance(n.ctx, ast.Load)}
    bound |= {a.arg for n in nodes if isinstance(n, ast.arguments) for a in _params(n)}
    free = [
        n.id
        for n in nodes
        if isinstance(n, ast.Name) and n.id not in bound and not hasattr(builtins, n.id)
    ]
    if free:
        return f"name {free[0]!r} is not defined where the harness evaluates it (only builtins are)"
    return None


def _params(args: ast.arguments) -> list[ast.arg]:
    extra = [a for a in (args.vararg, args.kwarg) if a is not None]
    return [*args.posonlyargs, *args.args, *args.kwonlyargs, *extra]


class Task(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """A verifiable task.

    The text the agent writes is placed after `prefix` (for HumanEval-shaped tasks the prompt
    is the function's signature, so the agent writes its body) in `solution_file`; `files` are
    placed next to it. `timeout_s` bounds each test; `canonical_solution` (same convention as
    the agent's text) must pass.
    """

    id: str
    prompt: str
    entry_point: str
    tests: list[TestCase]
    prefix: str = ""
    runtime: str = "python"
    files: dict[str, str] = msgspec.field(default_factory=dict)
    verifier: VerifierKind = "tests"
    level: int = 1
    group: str = "default"
    tags: list[str] = msgspec.field(default_factory=list)
    risk: Risk = "low"
    canonical_solution: str | None = None
    solution_file: str = "solution.py"
    timeout_s: float = 2.0

    def __post_init__(self) -> None:
        if not _ID_RE.fullmatch(self.id):
            raise ValueError(f"id: {self.id!r} is not a valid task id")
        if not _IDENT_RE.fullmatch(self.entry_point):
            raise ValueError(f"entry_point: {self.entry_point!r} is not a Python identifier")
        if not self.tests:
            raise ValueError("tests: a task needs at least one test")
        if self.level < 1:
            raise ValueError(f"level: must be >= 1, got {self.level}")
        if not 0 < self.timeout_s <= 60:
            raise ValueError(f"timeout_s: must be in (0, 60], got {self.timeout_s}")
        if not self.solution_file.endswith(".py") or not _IDENT_RE.fullmatch(
            self.solution_file.removesuffix(".py")
        ):
            raise ValueError(f"solution_file: {self.solution_file!r} must be NAME.py")
        for path in self.files:
            # Refused here, at load time, rather than by the sandbox when the task first runs:
            # an empty name, a NUL byte, or a spelling of the solution file (`./solution.py`).
            norm = posixpath.normpath(path) if path else ""
            if (
                not path
                or "\0" in path
                or path.startswith("/")
                or ".." in path.split("/")
                or norm in (".", self.solution_file)
            ):
                raise ValueError(f"files: {path!r} must be a relative path inside the sandbox")

    def program(self, text: str) -> str:
        """The solution module for the agent's `text`."""
        return self.prefix + text


class TestOutcome(msgspec.Struct, frozen=True, kw_only=True):
    """How one test went; `detail` is a short reason for anything but a pass."""

    __test__ = False

    name: str
    status: TestStatus
    detail: str = ""


class Verdict(msgspec.Struct, frozen=True, kw_only=True):
    """The structured result of verifying one solution.

    `failure` says who is to blame when `passed` is false: `agent` (tests failed, the program
    timed out, crashed or broke a limit: a normal outcome, scored by `score`), `infrastructure`
    (the sandbox failed: retry elsewhere, never score), `evaluation` (the verifier itself broke
    or returned garbage). `score` is the fraction of tests passed (0 unless the failure is the
    agent's). `reused`: the verdict of an earlier run of the same program on the same tests
    (`tasks._reuse.ReusingVerifier`), not a run of its own.
    """

    passed: bool
    score: float
    tests: list[TestOutcome] = msgspec.field(default_factory=list)
    failure: FailureKind | None = None
    reason: str = ""
    duration_s: float = 0.0
    reused: bool = False

    @classmethod
    def infrastructure(cls, reason: str, *, duration_s: float = 0.0) -> Verdict:
        return cls(
            passed=False, score=0.0, failure="infrastructure", reason=reason, duration_s=duration_s
        )

    @classmethod
    def evaluation(cls, reason: str, *, duration_s: float = 0.0) -> Verdict:
        return cls(
            passed=False, score=0.0, failure="evaluation", reason=reason, duration_s=duration_s
        )
