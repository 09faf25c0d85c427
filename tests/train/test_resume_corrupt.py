"""A resume that meets a damaged file: a corrupt newest learner checkpoint is set aside (named
in a warning) and the one before it is resumed from; no usable checkpoint, or a damaged
`progress.json`, is one `TrainError` naming the file, not a traceback."""

from __future__ import annotations

import json
import random
import threading
from pathlib import Path

import pytest
import torch
from structlog.testing import capture_logs

from actors.learner import load_checkpoint
from roost.train.config import TrainConfig, load_train_config
from roost.train.lineage import trace_lineage
from roost.train.records import ResumeRecord
from roost.train.run import TrainError, _newest_checkpoint, _off_loop, train
from roost.train.rundir import RunDir
from roost.train.summary import load_run_records
from tests.train.conftest import TINY, train_stopped_at, with_max_versions

pytestmark = pytest.mark.anyio


def _save(directory: Path, version: int) -> Path:
    path = directory / f"ckpt-{version:08d}.pt"
    payload = {
        "model": {},
        "optimizer": {},
        "version": version,
        "torch_rng": torch.get_rng_state(),
        "python_rng": random.Random(0).getstate(),
        "consumed": [f"s0-g{version}/0#0"],
        "curriculum": b"",
    }
    torch.save(payload, path)
    return path


def _truncate(path: Path) -> None:
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])


@pytest.mark.timeout(30)
def test_a_corrupt_newest_checkpoint_is_set_aside_for_the_one_before(tmp_path: Path) -> None:
    _save(tmp_path, 2)
    newest = _save(tmp_path, 4)
    _truncate(newest)

    with capture_logs() as logs:
        ckpt = _newest_checkpoint(tmp_path)

    assert ckpt is not None
    assert ckpt.version == 2
    assert not newest.exists()
    assert (tmp_path / (newest.name + ".corrupt")).exists()
    warned = [e for e in logs if e["event"] == "corrupt_checkpoint_skipped"]
    assert [e["path"] for e in warned] == [str(newest)]
    # The learner's later saves are again the newest.
    assert load_checkpoint(tmp_path).version == 2


@pytest.mark.timeout(30)
def test_no_usable_checkpoint_is_an_error_naming_each_file(tmp_path: Path) -> None:
    older, newest = _save(tmp_path, 2), _save(tmp_path, 4)
    _truncate(newest)
    older.write_bytes(b"")

    with pytest.raises(TrainError, match="no usable learner checkpoint") as raised:
        _newest_checkpoint(tmp_path)

    assert str(newest) in str(raised.value)
    assert str(older) in str(raised.value)
    assert newest.exists()  # left as found
    assert older.exists()


@pytest.mark.timeout(30)
def test_no_checkpoint_is_a_first_segment(tmp_path: Path) -> None:
    assert _newest_checkpoint(tmp_path) is None


@pytest.mark.timeout(60)
@pytest.mark.parametrize("content", [b'{"segment": 0, "rl": {', b"[1, 2]", b"\xff\xfe"])
async def test_a_damaged_progress_file_is_an_error_naming_it(
    tmp_path: Path, content: bytes
) -> None:
    config_path = tmp_path / "tiny.toml"
    config_path.write_text(TINY)
    run = RunDir(tmp_path / "run")
    run.create()
    run.progress_file.write_bytes(content)

    with pytest.raises(TrainError, match="cannot resume") as raised:
        await train(load_train_config(config_path), run.root)

    assert str(run.progress_file) in str(raised.value)
    assert run.progress_file.read_bytes() == content  # not overwritten


@pytest.mark.timeout(300)
async def test_a_resume_past_a_truncated_checkpoint_continues_from_the_one_before(
    tiny_config: TrainConfig, tmp_path: Path
) -> None:
    out = tmp_path / "run"
    run = RunDir(out)
    config = with_max_versions(tiny_config, 4)
    await train_stopped_at(config, out, stop_at=2)
    kept = sorted(run.checkpoints.glob("ckpt-*.pt"))
    assert len(kept) == 2  # learner.keep_checkpoints
    previous = load_checkpoint(kept[0]).version
    _truncate(kept[-1])

    with capture_logs() as logs:
        summary = await train(config, out)

    assert [e["path"] for e in logs if e["event"] == "corrupt_checkpoint_skipped"] == [
        str(kept[-1])
    ]
    records, problems = load_run_records(run)
    assert problems == []
    assert [r.version for r in records if isinstance(r, ResumeRecord)] == [previous]
    versions = [s.version for s in trace_lineage(records).steps]
    assert versions == list(range(1, versions[-1] + 1))
    assert versions[-1] >= 4
    assert summary["balanced"] is True
    assert json.loads(run.progress_file.read_text())["rl"]["done"] is True


@pytest.mark.timeout(30)
async def test_weights_io_that_hangs_is_abandoned_at_its_deadline(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr("roost.train.run.WEIGHTS_TIMEOUT_S", 0.2)
    release = threading.Event()

    def hung_save() -> None:
        release.wait()  # a save blocked in the kernel, as on a dead disk

    try:
        with pytest.raises(TrainError, match="hung_save did not finish"):
            await _off_loop(hung_save)
    finally:
        release.set()
