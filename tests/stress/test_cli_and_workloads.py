"""`roost stress` from the command line, and workload files that are wrong."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from roost.cli import cli
from roost.stress.workload import WorkloadError, load_workload

WORKLOADS = Path(__file__).parents[2] / "scripts" / "workloads"

KEYS = {
    "makespan_s",
    "throughput_per_s",
    "latency_p50_s",
    "latency_p99_s",
    "queue_wait_p99_s",
    "utilization",
    "cold_starts",
    "retries",
    "failures_by_reason",
    "fairness_jain",
    "requested",
    "completed",
    "failed",
    "cancelled",
    "wall",
}


@pytest.mark.parametrize("name", ["mixed.toml", "faults.toml", "scale.toml"])
def test_builtin_workloads_load(name: str) -> None:
    assert load_workload(WORKLOADS / name).groups


def test_stress_writes_json_with_fixed_keys_and_plots(tmp_path: Path) -> None:
    out = tmp_path / "out.json"
    result = CliRunner().invoke(
        cli,
        [
            "stress",
            "--workload",
            str(WORKLOADS / "mixed.toml"),
            "--policies",
            "fifo,random",
            "--rollouts",
            "100",
            "--concurrency",
            "16",
            "--seed",
            "3",
            "--json",
            str(out),
            "--plot",
            str(tmp_path / "plots"),
        ],
    )
    assert result.exit_code == 0, result.output
    data = json.loads(out.read_text())
    assert [p["policy"] for p in data["policies"]] == ["fifo", "random"]
    for policy in data["policies"]:
        assert set(policy) >= KEYS, KEYS - set(policy)
        assert policy["requested"] == policy["completed"] + policy["failed"] + policy["cancelled"]
    assert (tmp_path / "plots" / "latency_cdf.png").stat().st_size > 1000
    assert (tmp_path / "plots" / "utilization.png").stat().st_size > 1000


def test_unknown_policy_is_a_clear_error() -> None:
    result = CliRunner().invoke(
        cli, ["stress", "--workload", str(WORKLOADS / "mixed.toml"), "--policies", "lifo"]
    )
    assert result.exit_code == 2
    assert "unknown policies ['lifo']" in result.output


def test_a_concurrency_beyond_the_bound_is_refused_before_any_actor_starts() -> None:
    # One actor per worker: 10**9 would exhaust memory long before a rollout ran.
    result = CliRunner().invoke(
        cli,
        ["stress", "--workload", str(WORKLOADS / "mixed.toml"), "--concurrency", str(10**9)],
    )
    assert result.exit_code == 2
    assert "--concurrency" in result.output
    assert "1<=x<=100000" in result.output


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            "name = 'x'\n[[groups]]\nname = 'g'\n"
            "steps_to_pass = { dist = 'lognormal', median = 1.0 }",
            r"lognormal needs 'sigma' - at `\$.groups\[0\].steps_to_pass`",
        ),
        ("name = 'x'\n[cluster]\nnodez = 3", r"unknown field `nodez` - at `\$.cluster`"),
        ("name = 'x'\n[[groups]]\nname = 'g'\nruntime = 'rust'", "needs runtime 'rust'"),
        ("name = 'x'\n[faults]\ncrash_rate = 2.0", r"crash_rate must be within \[0, 1\]"),
        ("name = [", "not valid TOML"),
        ("name = 'x'\n[[groups]]\nname = 'g'\nweight = nan", "weight must be finite and > 0"),
    ],
)
def test_bad_workload_files_name_the_key_path(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "bad.toml"
    path.write_text(text)
    with pytest.raises(WorkloadError, match=message):
        load_workload(path)
    result = CliRunner().invoke(cli, ["stress", "--workload", str(path)])
    assert result.exit_code == 1
    assert "bad.toml" in result.output
