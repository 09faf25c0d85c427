"""The regression guard: each benchmark suite's quick mode, failing only on a gross regression.

A benchmark, not a timed test: every figure checked is a ratio measured side by side in one
run (or, for scale, a figure against its absolute target), and it fails only past half its
target (`roost.bench.targets`), so noise on a shared machine passes and a ten-fold slowdown
does not. A figure past that line is measured once more before the test fails (where a second
quick run fits in the test timeout): a real regression fails twice, a stall of the machine
seldom does. The message names the figure, its value and the target.

Outside CI a suite that needs a missing part (bubblewrap, the sandbox suite's module) is
skipped with the reason; in CI (`CI=true`) that is a failure.
"""

from __future__ import annotations

import os
import time
from typing import Any, NoReturn

import pytest

from roost.bench import all as suites
from roost.bench.targets import Target, gross_regressions, targets_of

IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")
#: Fewer repetitions where the default quick mode would take most of the guard's minute.
REPEATS: dict[str, int | None] = {"generation": 1}
#: A second run only where it fits in the 120 s test timeout after the first.
RERUN_IF_UNDER_S = 50.0


def _missing(reason: str) -> NoReturn:
    if IN_CI:
        pytest.fail(f"{reason} (CI=true: a missing part is a failure)")
    pytest.skip(reason)


def _checked_targets(name: str, module: Any, result: dict[str, Any]) -> list[Target]:
    """The suite's targets whose figure it measured; a figure left out because a part is
    missing (the result says which, e.g. `process.missing`, `backends.X.unavailable`) fails in
    CI and is only left unchecked outside it."""
    targets = targets_of(name, module)
    absent = [t.guard or t.figure for t in targets if t.value_in(result, t.guard) is None]
    if absent and IN_CI:
        pytest.fail(f"{name}: figures not measured (a missing part?): {absent}")
    return [t for t in targets if (t.guard or t.figure) not in absent]


@pytest.mark.parametrize("name", list(suites.SUITES))
def test_quick_mode_has_no_gross_regression(name: str) -> None:
    module = suites.load_suite(name)
    if module is None:
        _missing(f"{suites.SUITES[name]} is not in this checkout")
    started = time.perf_counter()
    result = module.run(quick=True, repeats=REPEATS.get(name))
    assert targets_of(name, module), f"{name}: the suite declares no target to guard"
    targets = _checked_targets(name, module, result)
    if not targets:
        _missing(f"{name}: none of its figures was measured here (missing parts)")
    first = _past_bound(targets, result)
    if not first:
        return
    # Measured once more where a second quick run fits in the test's timeout: a real
    # regression is past its bound twice, noise seldom is.
    if time.perf_counter() - started < RERUN_IF_UNDER_S:
        again = _past_bound(targets, module.run(quick=True, repeats=REPEATS.get(name)))
        persistent = sorted(set(first) & set(again))
        assert not persistent, (
            f"{name}: gross regression in two runs: {[first[f] for f in persistent]}; "
            f"then {[again[f] for f in persistent]}"
        )
        return
    pytest.fail(f"{name}: gross regression: {list(first.values())}")


def _past_bound(targets: list[Target], result: dict[str, Any]) -> dict[str, str]:
    """Figure -> message, for each figure past half its target."""
    return {
        target.guard or target.figure: problems[0]
        for target in targets
        if (problems := gross_regressions([target], result))
    }
