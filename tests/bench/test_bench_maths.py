"""Benchmarks on the edges: a NaN figure under the regression guard, the p95 of a few samples,
a raw Docker baseline facing a hung daemon, and a script given a run directory that is not
there."""

from __future__ import annotations

import math
import subprocess
import sys
from pathlib import Path

import anyio
import pytest

from roost.bench import sandbox as sandbox_suite
from roost.bench.sandbox import RAW_DOCKER_DEADLINE_S, DockerBenchTimeout, _pcts
from roost.bench.targets import Target, gross_regressions

ROOT = Path(__file__).parents[2]


@pytest.mark.parametrize("better", ["higher", "lower"])
def test_a_nan_figure_is_a_regression_not_a_pass(better: str) -> None:
    # An empty histogram's percentile is NaN, and NaN compares false against any bound.
    target = Target("sim.loop_lag_p99_ms", 20.0, better)  # type: ignore[arg-type]
    problems = gross_regressions([target], {"sim": {"loop_lag_p99_ms": math.nan}})
    assert len(problems) == 1
    assert "sim.loop_lag_p99_ms = nan, not a finite number" in problems[0]


@pytest.mark.parametrize(("n", "rank"), [(1, 1), (2, 2), (20, 19), (100, 95), (101, 96)])
def test_p95_is_the_nearest_rank(n: int, rank: int) -> None:
    samples = [float(i) for i in range(n, 0, -1)]  # 1..n, unsorted
    figures = _pcts(samples)
    assert figures["p95_s"] == rank
    assert figures["n"] == n


def test_bench_reuse_on_a_missing_run_dir_says_so_without_a_traceback(tmp_path: Path) -> None:
    missing = tmp_path / "no-such-run"
    done = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "bench_reuse.py"), str(missing)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
    )
    assert done.returncode == 1
    assert "Traceback" not in done.stderr
    assert f"{missing}: not a roost train run directory" in done.stderr


class _HungContainer:
    """A container whose daemon never answers `wait`; removal still works."""

    def __init__(self) -> None:
        self.deleted = False

    async def start(self) -> None:
        pass

    async def wait(self) -> None:
        await anyio.sleep_forever()

    async def delete(self, *, force: bool) -> None:
        self.deleted = force


class _Containers:
    def __init__(self, container: _HungContainer) -> None:
        self.container = container

    async def create(self, config: dict[str, object]) -> _HungContainer:
        return self.container


class _Docker:
    def __init__(self, container: _HungContainer) -> None:
        self.containers = _Containers(container)


@pytest.mark.anyio
async def test_a_hung_daemon_ends_the_raw_lifecycle_with_an_error_and_removes_the_container() -> (
    None
):
    container = _HungContainer()
    # Virtual clock: both deadlines pass at once. The outer one only keeps a regression from
    # hanging the suite; reaching it fails the test (nothing raised).
    with (
        anyio.move_on_after(10 * RAW_DOCKER_DEADLINE_S) as outer,
        pytest.raises(DockerBenchTimeout, match="start\\+wait"),
    ):
        await sandbox_suite._raw_container_lifecycle(_Docker(container), "runc")  # type: ignore[arg-type]
    assert not outer.cancelled_caught
    assert container.deleted
