"""Reliability tests: fuzzing every boundary that reads untrusted bytes, attacks sent as episode
actions, and a short leak soak.

Hypothesis runs derandomized (the same examples on every run, so CI is reproducible) with no
per-example deadline: the machine is shared and timings are noisy, so a hang is caught by the
suite's per-test timeout instead. `ROOST_FUZZ_EXAMPLES` raises the example count for a longer
local fuzzing session.
"""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings

settings.register_profile(
    "roost-fuzz",
    max_examples=int(os.environ.get("ROOST_FUZZ_EXAMPLES", "150")),
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
FUZZ = settings.get_profile("roost-fuzz")
