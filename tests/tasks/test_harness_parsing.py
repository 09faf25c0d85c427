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
from tests.tasks._helpers import ADD_ONE, real_sandbox


def _harness_functions() -> dict[str, Any]:
    """The harness's pure functions, without the script around them (it reads a job on stdin)."""
    start, end = HARNESS_SOURCE.index("NUMBERS = "), HARNESS_SOURCE.index("class Child:")
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


@pytest.mark.parametrize(
    "text", ["frozenset()", "frozenset({1, 'a'})", "{frozenset({frozenset()}), frozenset({2})}"]
)
def test_a_frozenset_parses_as_its_repr_reads(text: str) -> None:
    # Beyond literal_eval: a set of frozensets has no other spelling.
    value = HARNESS["literal"](text)
    assert value == eval(text)
    assert type(value) is type(eval(text))
    assert repr(value) == repr(eval(text))


@pytest.mark.parametrize(
    "text", ["frozenset([1])", "frozenset({1}, {2})", "frozenset(x)", "frozenset(s={1})"]
)
def test_other_frozenset_calls_are_refused(text: str) -> None:
    with pytest.raises(ValueError, match="not a plain value"):
        HARNESS["literal"](text)


def test_a_reply_parses_into_its_index_kind_and_string_payload() -> None:
    assert HARNESS["parse"](b"3\tvalue\t'[1, 2]'") == (3, "value", "[1, 2]")
    assert HARNESS["parse"](b"-1\tok\t''") == (-1, "ok", "")


@pytest.mark.parametrize(
    "line",
    [
        b"0\tvalue\t2",  # the child's `send` always writes a string: this one was forged
        b"0\tvalue\t[1]",
        b"-1\tok\tNone",
        b"0\tvalue\t'unterminated",
        b"0\tvalue",
        b"zero\tvalue\t'2'",
        b"0\tvalue\t" + b"[" * 300 + b"]" * 300,
        b"0\tvalue\t{[1]: 2}",
        b"\xff\xfe\t\x00",
    ],
)
def test_any_other_reply_is_unreadable_not_a_harness_crash(line: bytes) -> None:
    assert HARNESS["parse"](line) == (None, "error", "unreadable reply")


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


@pytest.mark.anyio
@pytest.mark.parametrize("anyio_backend", [REAL])
async def test_a_reply_whose_payload_is_no_string_is_the_solutions_error() -> None:
    # The harness used to call `.lstrip` on the payload and die: an evaluation failure.
    forged = "    return x\nimport __main__\n__main__.repr = lambda value: '2'\n"
    async with real_sandbox() as sandbox:
        verdict = await TestsVerifier().verify(ADD_ONE, forged, sandbox)
    assert verdict.failure == "agent", verdict
    assert [(t.status, t.detail) for t in verdict.tests] == [("error", "unreadable reply")] * 3


SUBCLASSES = Task(
    id="subclasses",
    prompt="",
    entry_point="f",
    tests=[
        TestCase(call="f('counter')", expected="{'a': 2, 'b': 1}"),
        TestCase(call="f('defaultdict')", expected="{'x': [1]}"),
        TestCase(call="f('ordered')", expected="{'a': 2, 'b': 1}"),
        TestCase(call="f('namedtuple')", expected="(1, (2, 3))"),
        TestCase(call="f('list')", expected="[1, [2]]"),
        TestCase(call="f('keys')", expected="{1, 2}"),
        TestCase(call="f('frozenset')", expected="{1, 2}"),
        TestCase(call="f('frozensets')", expected="{frozenset({1, 2}), frozenset()}"),
        TestCase(call="f('nested')", expected="[{'a': 1}, ({'k': (1, 2)},)]"),
        TestCase(call="f('intenum')", expected="[2, 'red', 1.5]"),
    ],
    timeout_s=1.0,
)
BUILDERS = """\
import collections
import enum
P = collections.namedtuple("P", "x y")
class Level(enum.IntEnum):
    HIGH = 2
class Name(str):
    def __str__(self):
        return "a lie"
class Half(float):
    pass
class Items(list):
    pass
def f(kind):
    if kind == "defaultdict":
        d = collections.defaultdict(list)
        d["x"].append(1)
        return d
    return {
        "counter": lambda: collections.Counter("aba"),
        "ordered": lambda: collections.OrderedDict(b=1, a=2),
        "namedtuple": lambda: P(1, P(2, 3)),
        "list": lambda: Items([1, Items([2])]),
        "keys": lambda: {1: "a", 2: "b"}.keys(),
        "frozenset": lambda: frozenset({1, 2}),
        "frozensets": lambda: {frozenset({1, 2}), frozenset()},
        "nested": lambda: [collections.Counter("a"), (collections.OrderedDict(k=P(1, 2)),)],
        "intenum": lambda: [Level.HIGH, Name("red"), Half(1.5)],
    }[kind]()
"""


@pytest.mark.anyio
@pytest.mark.parametrize("anyio_backend", [REAL])
async def test_a_container_that_equals_the_expected_value_passes_whatever_its_class() -> None:
    # MBPP task 88's canonical solution returns a Counter: Python's `==` passes it.
    wrong = BUILDERS.replace('"aba"', '"abb"').replace("P(2, 3)", "P(2, 4)").replace("= 2", "= 3")
    async with real_sandbox() as sandbox:
        right = await TestsVerifier().verify(SUBCLASSES, BUILDERS, sandbox)
        miss = await TestsVerifier().verify(SUBCLASSES, wrong, sandbox)
    assert [t.status for t in right.tests] == ["passed"] * len(SUBCLASSES.tests), right.tests
    assert [t.status for t in miss.tests[:4]] == ["failed", "passed", "passed", "failed"]
    # An IntEnum, a str subclass whose __str__ lies, a float subclass: sent as their values.
    assert miss.tests[-1].status == "failed"
    assert miss.tests[-1].detail == "f('intenum') = [3, 'red', 1.5]"


ODD = Task(
    id="odd",
    prompt="",
    entry_point="f",
    tests=[
        TestCase(call="f('cycle')", expected="[[]]"),
        TestCase(call="f('liar')", expected="[1]"),
        TestCase(call="f('deep')", expected="0"),
    ],
    timeout_s=1.0,
)
ODD_BUILDERS = """\
class Liar(list):
    def __eq__(self, other):
        return True
def f(kind):
    if kind == "cycle":  # a cycle with fan-out: converting every path would never end
        a = []
        a.extend([a] * 8)
        return a
    if kind == "liar":
        return Liar([0])
    deep = []
    for _ in range(400):
        deep = [deep]
    return deep
"""


@pytest.mark.anyio
@pytest.mark.parametrize("anyio_backend", [REAL])
async def test_cycles_deep_nesting_and_lying_subclasses_fail_as_plain_values() -> None:
    async with real_sandbox() as sandbox:
        verdict = await TestsVerifier().verify(ODD, ODD_BUILDERS, sandbox)
    cycle, liar, deep = verdict.tests
    # Converted down to the cycle, which repr writes as `[...]` (a list holding Ellipsis), in
    # time: no timeout.
    assert (cycle.status, cycle.detail[:25]) == ("failed", "f('cycle') = [[[...], [..")
    # Compared as the list it holds, not by its `__eq__`.
    assert (liar.status, liar.detail) == ("failed", "f('liar') = [0]")
    # Left as it is past depth 100, then refused by the parser's nesting limit.
    assert (deep.status, deep.detail) == ("failed", "not a plain value")
