"""The process backend's reaper of leftovers from owners that died without closing them."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from pathlib import Path

import anyio
import pytest

import sandboxes.process as process
from sandboxes import _host_reaper
from sandboxes._host_reaper import reap_host_leftovers


def _dead_pid() -> int:
    """The pid of a process that has exited and been waited for."""
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def _leftover(base: Path, sandbox_id: str, pid: int) -> Path:
    entry = base / f"roost-{sandbox_id}-p{pid}-x1y2"
    (entry / "work").mkdir(parents=True)
    (entry / "work" / "file").write_text("left behind")
    return entry


def test_removes_what_dead_owners_left_and_keeps_what_live_ones_hold(tmp_path: Path) -> None:
    dead = _leftover(tmp_path, "ab12", _dead_pid())
    live = _leftover(tmp_path, "cd34", os.getpid())
    unrelated = tmp_path / "roost-notasandbox"
    unrelated.mkdir()

    assert reap_host_leftovers(tmp_path) == ["ab12"]
    assert not dead.exists()
    assert live.exists()
    assert unrelated.exists()


def test_an_unmount_that_fails_leaves_that_entry_and_reaps_the_rest(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    stuck = _leftover(tmp_path, "ab12", _dead_pid())
    plain = _leftover(tmp_path, "cd34", _dead_pid())

    def ismount(path: object) -> bool:
        return Path(str(path)) == stuck / "work"

    def hung_umount(argv: list[str], **kwargs: object) -> subprocess.CompletedProcess[bytes]:
        raise subprocess.TimeoutExpired(argv, 10)

    monkeypatch.setattr(_host_reaper.os.path, "ismount", ismount)
    monkeypatch.setattr(_host_reaper.subprocess, "run", hung_umount)

    assert reap_host_leftovers(tmp_path) == ["cd34"]
    assert (stuck / "work" / "file").exists()  # not emptied under what may still be a mount
    assert not plain.exists()


def test_the_reap_runs_once_per_base_directory_off_the_event_loop(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[tuple[Path, int]] = []

    def record(base_dir: Path) -> list[str]:
        calls.append((base_dir, threading.get_ident()))
        return []

    monkeypatch.setattr(process, "reap_host_leftovers", record)
    monkeypatch.setattr(process, "_reaped", set())

    async def main() -> int:
        await process._reap_once(tmp_path)
        await process._reap_once(tmp_path)
        return threading.get_ident()

    loop_thread = anyio.run(main)
    assert [base for base, _ in calls] == [tmp_path]
    assert calls[0][1] != loop_thread


def test_a_failing_reap_does_not_fail_the_sandbox_start(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(base_dir: Path) -> list[str]:
        raise PermissionError(f"cannot list {base_dir}")

    monkeypatch.setattr(process, "reap_host_leftovers", broken)
    monkeypatch.setattr(process, "_reaped", set())

    anyio.run(process._reap_once, tmp_path)  # logs and returns
    assert tmp_path in process._reaped
