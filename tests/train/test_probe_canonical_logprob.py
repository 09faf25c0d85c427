"""scripts/probe_canonical_logprob.py reads a run directory and scores every form it finds."""

from __future__ import annotations

import runpy
import sys
from pathlib import Path

import pytest

from roost.train.config import load_train_config
from roost.train.phases import make_policy, save_weights
from runtime.config import dump_config
from tests.train.conftest import TINY

SCRIPT = Path(__file__).parents[2] / "scripts" / "probe_canonical_logprob.py"


def test_the_probe_scores_each_form_of_a_level(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    written = tmp_path / "tiny.toml"
    written.write_text(TINY.replace("levels = [1, 2]", "levels = [1, 2, 3]", 1))
    config = load_train_config(written)
    run = tmp_path / "run"
    (run / "checkpoints").mkdir(parents=True)
    (run / "config.toml").write_text(dump_config(config))
    save_weights(make_policy(config.model, seed=0), run / "checkpoints" / "sft.pt")

    argv = [str(SCRIPT), str(run), "--tasks", "2", "--scan", "400"]
    monkeypatch.setattr(sys, "argv", argv)
    runpy.run_path(str(SCRIPT), run_name="__main__")
    rows = [line.split() for line in capsys.readouterr().out.splitlines()[2:]]
    forms = {row[0] for row in rows}
    assert {"III", "ICI", "NII"} <= forms
    assert all(set(form) <= set("INC") and len(form) == 3 for form in forms)
    for row in rows:
        assert 1 <= int(row[1]) <= 2
        total, least = float(row[2]), float(row[3])
        assert total <= least < 0  # an untrained model finds no solution likely


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["{tmp}"], "not a roost train run directory"),
        (["{tmp}", "--level", "5"], "--level: a chain level"),
    ],
)
def test_the_probe_names_what_is_wrong(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    args: list[str],
    message: str,
) -> None:
    argv = [str(SCRIPT), *(a.format(tmp=tmp_path) for a in args)]
    monkeypatch.setattr(sys, "argv", argv)
    with pytest.raises(SystemExit) as exit_:
        runpy.run_path(str(SCRIPT), run_name="__main__")
    assert exit_.value.code == 2
    assert message in capsys.readouterr().err
