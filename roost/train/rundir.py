"""The run directory: where everything a run writes lives, and its progress file.

    RUN_DIR/config.toml        the configuration as resolved (what ran)
    RUN_DIR/metrics.jsonl      one metrics snapshot per interval (runtime.monitor)
    RUN_DIR/trajectories.log   append-only msgpack frames (roost/train/records.py)
    RUN_DIR/checkpoints/       sft.pt (after the warm start) and ckpt-<version>.pt (learner)
    RUN_DIR/progress.json      which phases are done, their figures (for --resume)
    RUN_DIR/summary.json       the run's figures (roost/train/summary.py)
    RUN_DIR/report.html, *.png the report (roost report RUN_DIR rebuilds it)

Every file that is replaced rather than appended is written atomically (temporary file in
the same directory, fsync, os.replace), so a crash leaves the old version or the new one.
"""

from __future__ import annotations

import datetime
import json
import os
import tempfile
from pathlib import Path
from typing import Any

__all__ = ["CorruptProgressError", "RunDir", "default_run_dir", "write_atomic"]


class CorruptProgressError(ValueError):
    """`progress.json` is there but cannot be read; the message names the file. Written
    atomically, so this is a disk fault or a hand edit, and nothing safe to resume from."""


def default_run_dir(name: str, root: Path = Path("runs")) -> Path:
    stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
    return root / f"{stamp}-{name}"


def write_atomic(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}-", suffix=".tmp")
    try:
        os.fchmod(fd, 0o644)  # mkstemp makes 0600; these are the run's readable outputs
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


class RunDir:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.config = root / "config.toml"
        self.metrics = root / "metrics.jsonl"
        self.log = root / "trajectories.log"
        self.checkpoints = root / "checkpoints"
        self.sft_weights = self.checkpoints / "sft.pt"
        self.progress_file = root / "progress.json"
        self.summary = root / "summary.json"
        self.report = root / "report.html"

    def create(self) -> None:
        self.checkpoints.mkdir(parents=True, exist_ok=True)

    def read_progress(self) -> dict[str, Any]:
        """What `progress.json` says, or `{}` before it exists.

        :raises CorruptProgressError: it is there but not a JSON object (naming the file).
        """
        if not self.progress_file.exists():
            return {}
        try:
            data = json.loads(self.progress_file.read_bytes())
        except ValueError as exc:  # JSONDecodeError, or bytes that are not UTF-8
            raise CorruptProgressError(f"{self.progress_file}: unreadable JSON ({exc})") from None
        if not isinstance(data, dict):
            raise CorruptProgressError(
                f"{self.progress_file}: holds a JSON {type(data).__name__}, not an object"
            )
        return data

    def write_progress(self, progress: dict[str, Any]) -> None:
        write_atomic(self.progress_file, json.dumps(progress, indent=2).encode())

    def write_json(self, path: Path, value: Any) -> None:
        write_atomic(path, json.dumps(value, indent=2).encode())
