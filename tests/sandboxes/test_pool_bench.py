"""`roost bench sandbox` names every figure it promises (the values are the benchmark's business,
not a test's: see docs/benchmarks.md)."""

from __future__ import annotations

import pytest

from roost.bench import sandbox as suite
from roost.bench.targets import verdicts

pytestmark = [pytest.mark.timeout(120)]


def test_quick_run_reports_each_measure_and_named_ratio_for_the_process_backend() -> None:
    result = suite.run(quick=True, backends=("process",))
    process = result["backends"]["process"]
    for measure in ("cold", "acquire", "exec", "reset", "recreate", "raw_subprocess_exec"):
        assert process[measure]["p50_s"] > 0
        assert process[measure]["p95_s"] >= process[measure]["p50_s"]
    assert process["execs_per_s_8_sandboxes"] > 0
    assert result["ratios"]["process.reset_speedup_vs_recreate"] > 0
    assert result["ratios"]["process.exec_vs_subprocess_ratio"] > 0
    assert set(process["targets"]) == {
        "acquire_p50_below_1ms",
        "reset_5x_faster_than_recreate",
        "exec_p50_within_target",
    }
    lines = {line["figure"]: line for line in verdicts(suite.TARGETS, result)}
    assert lines["backends.process.reset_speedup_vs_recreate"]["value"] is not None
    assert lines["backends.docker.exec_speedup_vs_docker_exec"]["value"] is None  # not run
