"""`roost sandbox run/check/images` as a user calls them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from roost.cli import cli
from tests.sandboxes.conftest import require_backend

pytestmark = pytest.mark.timeout(120)
KEYS = {"exit_code", "stdout", "stderr", "timed_out", "oom_killed", "duration_s", "infra_error"}


def _run(*args: str, input: bytes | None = None) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, ["sandbox", *args], input=input)
    return result.exit_code, result.stdout, result.stderr


def test_run_prints_one_json_result_and_exits_zero_whatever_the_command_did() -> None:
    require_backend("process")
    code, out, _ = _run("run", "--backend", "process", "--", "sh", "-c", "echo hi; exit 3")
    data = json.loads(out)
    assert code == 0
    assert data.keys() >= KEYS
    assert (data["exit_code"], data["stdout"], data["infra_error"]) == (3, "hi\n", None)


def test_run_keeps_non_utf8_output_exact_in_base64() -> None:
    require_backend("process")
    code, out, _ = _run("run", "--backend", "process", "--", "printf", "\\377ok")
    data = json.loads(out)
    assert code == 0
    assert data["stdout_b64"] == "/29r"


def test_run_reads_stdin_from_a_file_and_applies_the_timeout(tmp_path: Path) -> None:
    require_backend("process")
    stdin = tmp_path / "in.txt"
    stdin.write_bytes(b"from a file")
    code, out, _ = _run("run", "--backend", "process", "--stdin-file", str(stdin), "--", "cat")
    assert json.loads(out)["stdout"] == "from a file"
    code, out, _ = _run("run", "--backend", "process", "--timeout", "0.5", "--", "sleep", "5")
    assert code == 0
    assert json.loads(out)["timed_out"] is True


def test_bad_limit_is_a_usage_error_naming_the_option() -> None:
    code, _, err = _run("run", "--backend", "process", "--memory", "lots", "--", "true")
    assert code == 2
    assert "memory" in err
    assert "lots" in err


def test_sandbox_that_cannot_run_exits_nonzero_with_one_line(tmp_path: Path) -> None:
    env = {"DOCKER_HOST": f"unix://{tmp_path}/no-daemon.sock"}
    result = CliRunner().invoke(
        cli, ["sandbox", "run", "--backend", "docker", "--", "true"], env=env
    )
    assert result.exit_code == 3
    assert result.stdout == ""
    assert len(result.stderr.strip().splitlines()) == 1
    assert "create container" in result.stderr


def test_unknown_runtime_is_a_usage_error() -> None:
    code, _, err = _run("run", "--backend", "docker", "--runtime", "nodejs", "--", "true")
    assert code == 2
    assert "runtime" in err


def test_check_prints_a_table_and_passes_on_the_process_backend() -> None:
    require_backend("process")
    code, out, _ = _run("check", "--backend", "process", "--json")
    rows = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    assert rows
    assert all(r["status"] in ("pass", "weaker") for r in rows)
    assert code == 0
