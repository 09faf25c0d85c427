"""`kill -9` of a whole training run at random moments, then `roost train --resume`, until it
finishes: the log stays readable up to its last whole record, the version count continues from
the last checkpoint, every requested rollout ends with exactly one terminal record, no rollout
is trained on in two steps of the surviving lineage, and the dead runs' sandboxes are reaped."""

from __future__ import annotations

import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from actors.recorder import read_records
from roost.train.config import TrainConfig
from roost.train.lineage import trace_lineage
from roost.train.records import ResumeRecord, RunRecord, StepRecord, TrajectoryRecord
from roost.train.rundir import RunDir
from tests.train.conftest import TINY

RUN_DEADLINE_S = 90.0  # one segment of the tiny run takes seconds
KILLS = 3
CONFIG = TINY.replace("max_versions = 3", "max_versions = 6").replace(
    "checkpoint_every = 1", "checkpoint_every = 2"
)


def _roost(args: list[str], tmpdir: Path) -> subprocess.Popen[bytes]:
    env = {**os.environ, "TMPDIR": str(tmpdir), "PYTHONUNBUFFERED": "1"}
    return subprocess.Popen(
        [sys.executable, "-m", "roost", "train", *args, "--log-format", "json"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        start_new_session=True,  # its own process group: the kill takes the whole run
    )


def _kill_when(process: subprocess.Popen[bytes], ready: Callable[[], bool]) -> bool:
    """SIGKILL the run's process group once `ready()` holds; False if the run ended first."""
    deadline = time.monotonic() + RUN_DEADLINE_S
    while process.poll() is None:
        if ready():
            os.killpg(process.pid, signal.SIGKILL)
            process.communicate(timeout=30)  # reaps it and closes its pipe
            return True
        assert time.monotonic() < deadline, "the run neither reached the kill moment nor ended"
        # Watching the run directory from outside: a poll, not a synchronisation.
        time.sleep(0.02)
    return False


def _size(path: Path) -> int:
    return path.stat().st_size if path.exists() else 0


@pytest.fixture
def sandbox_tmp() -> Iterator[Path]:
    """The runs' TMPDIR, where the process backend keeps its sandboxes' host directories: under
    /tmp, as pytest's own directories are closed to the sandbox user."""
    path = Path(tempfile.mkdtemp(prefix="roost-kill-test-"))
    path.chmod(0o755)
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.mark.timeout(600)
def test_resume_after_kill_at_random_moments_loses_nothing(
    tiny_config: TrainConfig, tmp_path: Path, sandbox_tmp: Path
) -> None:
    del tiny_config  # its fixture checks bubblewrap; this test runs `roost train` itself
    rng = random.Random(11)
    config_path = tmp_path / "tiny.toml"
    config_path.write_text(CONFIG)
    tmpdir = sandbox_tmp
    out = tmp_path / "run"
    run = RunDir(out)
    killed: list[int] = []
    args = [str(config_path), "--out", str(out)]
    for _ in range(KILLS):
        # A random moment: once the log has grown by a random number of bytes (0: at once,
        # during start-up, SFT or the first evaluation).
        start = _size(run.log)
        grow = rng.choice([0, rng.randint(1, 1500), rng.randint(1500, 6000)])
        process = _roost(args, tmpdir)
        target = start + grow
        if _kill_when(process, lambda: run.config.exists() and _size(run.log) >= target):  # noqa: B023
            killed.append(process.pid)
            _, report, bad = read_records(run.log, RunRecord)
            assert bad == [], f"a whole record did not decode after a kill: {bad}"
        else:
            _, stderr = process.communicate(timeout=30)
            assert process.returncode == 0, stderr.decode()[-3000:]
            break
        args = ["--resume", str(out)]
    final = _roost(["--resume", str(out)], tmpdir)
    _, stderr = final.communicate(timeout=RUN_DEADLINE_S * 2)
    assert final.returncode == 0, stderr.decode()[-3000:]
    assert killed, "no kill happened: the test proved nothing"

    records, report, bad = read_records(run.log, RunRecord)
    assert bad == []
    assert not report.torn  # torn tails were cut before appending again
    lineage = trace_lineage(records)
    # The surviving lineage: each version once, counting on from every checkpoint resumed.
    versions = [s.version for s in lineage.steps]
    assert versions == list(range(1, versions[-1] + 1))
    assert versions[-1] >= 6
    resumes = [r for r in records if isinstance(r, ResumeRecord)]
    assert all(r.version % 2 == 0 for r in resumes)  # only whole checkpoints were resumed
    # Every requested rollout ends exactly once; nothing is left open.
    terminal = [r.rollout_id for r in records if isinstance(r, TrajectoryRecord)]
    assert len(terminal) == len(set(terminal))
    assert lineage.requested is not None
    assert set(terminal) == set(lineage.requested)
    assert lineage.open == []
    # No rollout trained on twice in the lineage, and a lineage step's rollouts are recorded.
    trained = [rid for step in lineage.steps for rid in step.rollout_ids]
    assert len(trained) == len(set(trained))
    assert set(trained) <= set(terminal)
    # A step lost with a killed process is void only above the checkpoint resumed from.
    logged = [r for r in records if isinstance(r, StepRecord | ResumeRecord)]
    for index, record in enumerate(logged):
        if isinstance(record, StepRecord) and record not in lineage.steps:
            resume = next(r for r in logged[index:] if isinstance(r, ResumeRecord))
            assert record.version > resume.version

    summary = json.loads(run.summary.read_text())
    assert summary["balanced"] is True
    assert summary["trained_twice"] == 0
    assert summary["requested"] == summary["scored"] + summary["failed"] + summary["cancelled"]
    assert summary["log_problems"] == []
    # The killed runs' sandboxes are gone: host directories and processes.
    for pid in killed:
        assert list(tmpdir.glob(f"roost-*-p{pid}-*")) == []
        assert _processes_mentioning(f"-p{pid}-") == []


def _processes_mentioning(text: str) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        if text.encode() in cmdline:
            found.append(int(entry.name))
    return found
