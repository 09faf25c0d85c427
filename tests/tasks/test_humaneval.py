"""The HumanEval and MBPP converters: which tests become call/expected, which stay a `check`.

A converted call runs in a child that has the solution's names and `candidate`, never the test
module: a call that needs anything else must stay a check, or right answers fail.
"""

from __future__ import annotations

import pytest

from tasks import Task, TestsVerifier
from tasks._humaneval import from_humaneval, from_mbpp
from tests.conftest import REAL
from tests.tasks._helpers import real_sandbox

ROUND = {
    "task_id": "H/round",
    "prompt": "def f(x):\n",
    "entry_point": "f",
    "canonical_solution": "    return round(x)\n",
}
WRONG = "    return int(x) + 1\n"

# The review's reproduction: the converted calls used `math` and `K`, which the child lacked.
MODULE_NAMES = (
    "import math\nK = 2\n"
    "def check(candidate):\n    assert candidate(math.pi) == 3\n    assert candidate(K) == 2\n"
)


def _task(test: str) -> Task:
    return from_humaneval({**ROUND, "test": test})


@pytest.mark.parametrize(
    "test",
    [
        MODULE_NAMES,
        "from math import pi as PI\ndef check(candidate):\n    assert candidate(PI) == 3\n",
        "import os.path\ndef check(candidate):\n    assert candidate(len(os.path.sep)) == 1\n",
        "(K := 2)\ndef check(candidate):\n    assert candidate(K) == 2\n",
        "def check(fn):\n    assert fn(3.2) == 3\n",  # the conversion assumes `candidate`
        "def check(candidate, k=2):\n    assert candidate(k) == 2\n",
        "from math import *\ndef check(candidate):\n    assert candidate(pi) == 3\n",
    ],
    ids=[
        "import-and-assign",
        "from-import-as",
        "dotted-import",
        "walrus",
        "param-not-candidate",
        "second-param",
        "star-import",
    ],
)
def test_a_call_needing_the_test_modules_names_stays_a_check(test: str) -> None:
    task = _task(test)
    assert "weak-channel" in task.tags
    [kept] = task.tests
    assert (kept.call, kept.check) == ("", f"{test}\ncheck(candidate)\n")


@pytest.mark.parametrize(
    "test",
    [
        "METADATA = {'author': 'jt'}\n\ndef check(candidate):\n    assert candidate(3.2) == 3\n",
        # Imported or assigned, but no call uses it.
        "import math\nK = 2\ndef check(candidate):\n    assert candidate(3.2) == 3\n",
        "def check(candidate, /):\n    assert candidate(abs(-3.2)) == 3\n",
    ],
    ids=["metadata", "unused-import-and-assign", "builtins-only"],
)
def test_a_call_needing_only_the_solution_is_still_converted(test: str) -> None:
    task = _task(test)
    assert "weak-channel" not in task.tags
    [converted] = task.tests
    assert (converted.call, converted.expected, converted.check) != ("", "", "")
    assert converted.call.startswith("candidate(")
    assert converted.expected == "3"


@pytest.mark.anyio
@pytest.mark.parametrize("anyio_backend", [REAL])
async def test_the_canonical_solution_passes_a_test_module_with_imports() -> None:
    task = _task(MODULE_NAMES)
    assert task.canonical_solution is not None
    async with real_sandbox() as sandbox:
        good, bad = await TestsVerifier().verify_many(
            task, [task.canonical_solution, WRONG], sandbox
        )
    assert good.passed, good  # was: NameError: name 'math' is not defined
    assert (bad.passed, bad.failure) == (False, "agent")


def test_test_code_that_does_not_compile_names_its_field() -> None:
    # Parses, but `return` outside a function only fails when compiled: before, at every answer.
    with pytest.raises(ValueError, match="'return' outside function") as info:
        _task("return 1\ndef check(candidate):\n    assert abs(candidate(1) - 1) < 1e-6\n")
    assert getattr(info.value, "field", None) == "test"
    mbpp = {"task_id": 1, "text": "t", "code": "def f(x): return x", "test_list": ["assert f(1)"]}
    with pytest.raises(ValueError, match="not valid Python") as info:
        from_mbpp(mbpp | {"test_setup_code": "x = ("})
    assert getattr(info.value, "field", None) == "test_setup_code"
