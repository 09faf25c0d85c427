"""Ctrl-C on `roost train`: the run drains, checkpoints, writes its summary and exits 0."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from roost.train.config import TrainConfig
from tests.train.conftest import TINY


def test_sigint_drains_checkpoints_and_exits_cleanly(
    tiny_config: TrainConfig, tmp_path: Path
) -> None:
    config = tmp_path / "tiny.toml"
    config.write_text(TINY.replace("max_versions = 3", "max_versions = 0"))
    out = tmp_path / "run"
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    with subprocess.Popen(
        [sys.executable, "-m", "roost", "train", str(config), "--out", str(out)],
        stderr=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        env=env,
        text=True,
    ) as proc:
        assert proc.stderr is not None
        try:
            # The learner's first checkpoint means RL is running: interrupt it there.
            for line in proc.stderr:
                if "checkpoint_saved" in line:
                    break
            proc.send_signal(signal.SIGINT)
            rest = proc.stderr.read()
            assert proc.wait(timeout=90) == 0, rest[-2000:]
        finally:
            if proc.poll() is None:
                proc.kill()
    assert f"roost train --resume {out}" in rest
    progress = json.loads((out / "progress.json").read_text())
    assert progress["rl"]["done"] is False
    summary = json.loads((out / "summary.json").read_text())
    assert summary["requested"] == summary["scored"] + summary["failed"] + summary["cancelled"]
    assert summary["balanced"]
    assert list((out / "checkpoints").glob("ckpt-*.pt"))
    assert not list((out / "checkpoints").glob(".ckpt-*")), "a temporary checkpoint was left"


@pytest.mark.anyio
async def test_unusable_backend_fails_before_any_training(
    tiny_config: TrainConfig, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import roost.train.run as run_module
    from roost.train.run import TrainError, train
    from sandboxes._errors import BackendUnavailableError

    def no_backend(spec: object) -> object:
        raise BackendUnavailableError("bubblewrap (bwrap) is not installed")

    monkeypatch.setattr(run_module, "create_sandbox", no_backend)
    with pytest.raises(TrainError, match="bubblewrap"):
        await train(tiny_config, tmp_path / "run")
    assert not (tmp_path / "run" / "checkpoints" / "sft.pt").exists()
