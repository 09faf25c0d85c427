"""Fuzzing the verifier with hostile answer texts: NUL bytes, lone surrogates, huge and
malformed programs. Whatever the text, the verdict is a pass or the agent's failure: an answer
must never be able to make the verifier report an evaluation failure (that would let an agent
push the evaluator into the unhealthy state) or an infrastructure failure (retried forever).
"""

from __future__ import annotations

import os
from typing import Any

import anyio
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tasks import TestsVerifier, Verdict
from tests.reliability.conftest import FUZZ
from tests.sandboxes.conftest import require_backend
from tests.tasks._helpers import ADD_ONE, real_sandbox

pieces = st.one_of(
    st.text(max_size=30),
    st.sampled_from(["\x00", "\ud800", "\udcff", "\ufeff", "\r", "    return x + 1\n", "(" * 200]),
)
answers = st.lists(pieces, min_size=1, max_size=6).map("".join)


def _judge(texts: list[str]) -> list[Verdict]:
    async def run() -> list[Verdict]:
        verifier = TestsVerifier()
        async with real_sandbox() as sandbox:
            return [await verifier.verify(ADD_ONE, text, sandbox) for text in texts]

    return anyio.run(run)


def _blamed_on_the_agent(verdict: Verdict) -> bool:
    return verdict.passed or verdict.failure == "agent"


@pytest.mark.parametrize(
    "text",
    [
        "    return x\x00\n",
        "    return '\ud800'\n",
        "\udcff",
        "    return x + 1\n" + "#" * 3_000_000,  # larger than the output cap, on stdin
        "    return (" * 400 + "x" + ")" * 400 + "\n",
        "\ufeff    return x + 1\n",
        "    import sys; sys.setrecursionlimit(10**6)\n    def f(n): return f(n + 1)\n    f(0)\n",
    ],
    ids=["nul", "surrogate", "escaped-surrogate", "3MB", "deep-parens", "bom", "recursion"],
)
def test_fuzz_answers_corpus_is_judged_as_the_agents(text: str) -> None:
    require_backend("process")
    (verdict,) = _judge([text])
    assert _blamed_on_the_agent(verdict), verdict


@settings(FUZZ, max_examples=int(os.environ.get("ROOST_FUZZ_SANDBOX_EXAMPLES", "6")))
@given(texts=st.lists(answers, min_size=1, max_size=4))
def test_fuzz_answers_any_text_is_a_pass_or_the_agents_failure(texts: list[str]) -> None:
    require_backend("process")
    verdicts: list[Any] = _judge(texts)
    assert all(_blamed_on_the_agent(v) for v in verdicts), verdicts
