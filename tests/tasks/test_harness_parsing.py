"""The harness parses replies as `ast.literal_eval` would and writes JSON as `json.dumps` would,
without importing either (they would double its start-up, paid on every verification)."""

from __future__ import annotations

import ast
import json
from typing import Any

import pytest

from tasks import Task, TestCase, TestsVerifier
from tasks._harness import HARNESS_SOURCE
from tests.conftest import REAL
from tests.tasks._helpers import real_sandbox


def _harness_functions() -> dict[str, Any]:
    """The harness's pure functions, without the script around them (it reads a job on stdin)."""
    start, end = HARNESS_SOURCE.index("NUMBERS = "), HARNESS_SOURCE.index("def parse(")
    namespace: dict[str, Any] = {}
    exec("import _ast\n" + HARNESS_SOURCE[start:end], namespace)
    return namespace


HARNESS = _harness_functions()

PLAIN = [
    "1",
    "-5",
    "+2.5",
    "1e308",
    "-0.0",
    "'text with \\'quotes\\' and \\\\ and \\n'",
    "b'\\x00bytes'",
    "(1, 'a', None, True)",
    "(1,)",
    "()",
    "[1, [2, (3, {4: 'x'})]]",
    "{1, 2, 3}",
    "set()",
    "{'a': [1, 2], (1, 2): {'b': None}}",
    "1+2j",
    "-1-2j",
    "3j",
    "...",
    "  7",
]
NOT_PLAIN = [
    "Ellipsis",  # repr(...), a name to literal_eval
    "object()",
    "f(1)",
    "nan",
    "inf",
    "-x",
    "1 + 2",
    "{**a}",
    "set([1])",
    "[i for i in range(3)]",
    "__import__('os')",
    "(",
    "'\x00'",
]


@pytest.mark.parametrize("text", PLAIN)
def test_plain_values_parse_as_literal_eval_parses_them(text: str) -> None:
    assert HARNESS["literal"](text) == ast.literal_eval(text)
    assert type(HARNESS["literal"](text)) is type(ast.literal_eval(text))


@pytest.mark.parametrize("text", NOT_PLAIN)
def test_anything_else_is_refused_as_literal_eval_refuses_it(text: str) -> None:
    with pytest.raises((ValueError, SyntaxError, TypeError)):
        ast.literal_eval(text)
    with pytest.raises((ValueError, SyntaxError, TypeError)):
        HARNESS["literal"](text)


def test_the_verdict_is_written_as_json_dumps_writes_it() -> None:
    verdict = {
        "solutions": [
            {
                "tests": [
                    {"name": "t0", "status": "passed"},
                    {"name": 'q"b\\n', "status": "failed", "detail": "f(1) = 'é\t\x00'"},
                    {"name": "astral \U0001f600", "status": "error", "detail": "lone \ud800"},
                ]
            },
            {"tests": []},
        ]
    }
    assert HARNESS["dump"](verdict) == json.dumps(verdict)


ECHO = Task(
    id="echo",
    prompt="def f(x):\n",
    prefix="def f(x):\n",
    entry_point="f",
    tests=[
        TestCase(call="f((1, -2.5, 'é'))", expected="(1, -2.5, 'é')"),
        TestCase(
            call="f({1: [None, {2, 3}], 'k': set()})", expected="{1: [None, {2, 3}], 'k': set()}"
        ),
        TestCase(call="f(1-2j)", expected="1-2j"),
        TestCase(call="f('\U0001f600 \"quoted\" \\\\')", expected="'\U0001f600 \"quoted\" \\\\'"),
    ],
    canonical_solution="    return x\n",
    timeout_s=2.0,
)


@pytest.mark.anyio
@pytest.mark.parametrize("anyio_backend", [REAL])
async def test_structured_values_and_awkward_text_round_trip_through_the_harness() -> None:
    async with real_sandbox() as sandbox:
        verifier = TestsVerifier()
        right = await verifier.verify(ECHO, "    return x\n", sandbox)
        wrong = await verifier.verify(ECHO, "    return [x, '\U0001f600\\\\\"é']\n", sandbox)
    assert right.passed, right
    assert [t.status for t in right.tests] == ["passed"] * 4
    assert not wrong.passed
    assert wrong.failure == "agent"
    assert [t.status for t in wrong.tests] == ["failed"] * 4
    assert all('\U0001f600\\\\"é' in t.detail for t in wrong.tests), wrong.tests
