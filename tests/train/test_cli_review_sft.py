"""`roost sft` on bad input: a value click's ranges let through (NaN) and a data file that is
not text are usage errors naming them, before any model is built."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from roost.cli import cli


def _data(tmp_path: Path, content: bytes = b'{"prompt": "a", "completion": "b"}\n') -> Path:
    path = tmp_path / "pairs.jsonl"
    path.write_bytes(content)
    return path


@pytest.mark.parametrize(
    ("option", "value", "message"),
    [
        ("--lr", "nan", "lr: must be finite"),
        ("--time-budget", "nan", "time_budget_s: must be >= 0"),
    ],
)
def test_a_nan_setting_is_a_usage_error(
    tmp_path: Path, option: str, value: str, message: str
) -> None:
    out = tmp_path / "w.pt"
    args = ["sft", "--data", str(_data(tmp_path)), "--out", str(out), option, value]
    result = CliRunner().invoke(cli, [*args, "--steps", "1"])
    assert result.exit_code == 2, result.output
    assert message in result.output
    assert not out.exists()


def test_a_data_file_that_is_not_text_is_named(tmp_path: Path) -> None:
    data = _data(tmp_path, b"\xff\xfe\n")
    out = tmp_path / "w.pt"
    result = CliRunner().invoke(cli, ["sft", "--data", str(data), "--out", str(out)])
    assert result.exit_code == 2, result.output
    assert f"{data}: not UTF-8 text (byte 0)" in result.output
    assert not out.exists()
