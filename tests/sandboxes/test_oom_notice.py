"""`OomNotices` against a real cgroup v1 memory cgroup: the kernel's word on an OOM outlives the
cgroup, and a cgroup removed without one reads as no OOM."""

from __future__ import annotations

import os
import secrets
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from sandboxes._oom_notice import OomNotices
from sandboxes._spec import MiB

MEMORY_V1 = Path("/sys/fs/cgroup/memory")

pytestmark = pytest.mark.skipif(
    not (os.geteuid() == 0 and os.access(MEMORY_V1, os.W_OK)),
    reason="needs root and a writable cgroup v1 memory hierarchy (the notices are v1 only)",
)


@pytest.fixture
def cgroup() -> Iterator[Path]:
    leaf = MEMORY_V1 / f"roost-oom-test-{secrets.token_hex(4)}"
    leaf.mkdir()
    (leaf / "memory.limit_in_bytes").write_text(str(32 * MiB))
    if (leaf / "memory.memsw.limit_in_bytes").exists():
        (leaf / "memory.memsw.limit_in_bytes").write_text(str(32 * MiB))
    yield leaf
    if leaf.exists():
        leaf.rmdir()


@pytest.fixture
def notices(cgroup: Path) -> Iterator[OomNotices]:
    registered = OomNotices.register(cgroup / "memory.oom_control")
    assert registered is not None
    yield registered
    registered.close()


def _allocate_in(cgroup: Path, size: int) -> int:
    """Run a program in the cgroup that allocates `size` bytes; its exit status."""
    program = f"import os; open({str(cgroup / 'cgroup.procs')!r}, 'w').write(str(os.getpid()));"
    program += f" b = b'x' * {size}"
    return subprocess.run([sys.executable, "-c", program], timeout=60).returncode


def test_an_oom_is_still_known_after_the_cgroup_is_gone(cgroup: Path, notices: OomNotices) -> None:
    assert not notices.seen()
    assert _allocate_in(cgroup, 256 * MiB) == -9  # SIGKILLed by the OOM killer
    assert notices.seen()
    cgroup.rmdir()
    assert notices.seen()


def test_a_cgroup_removed_without_an_oom_is_not_one(cgroup: Path, notices: OomNotices) -> None:
    assert _allocate_in(cgroup, 1 * MiB) == 0
    cgroup.rmdir()
    assert not notices.seen()


def test_only_a_v1_oom_control_file_is_registered(tmp_path: Path) -> None:
    assert OomNotices.register(tmp_path / "memory.events") is None
    assert OomNotices.register(tmp_path / "memory.oom_control") is None  # no such cgroup


def test_an_oom_first_read_after_the_removal_is_known_once_the_kernel_has_signalled(
    cgroup: Path, notices: OomNotices
) -> None:
    # The order a dead gVisor container gives: the OOM, the cgroup removed, and only then the
    # first look. Until the removal's own signal arrives one signal is ambiguous (undecided);
    # the wait for it is bounded, and the answer then is an OOM.
    assert _allocate_in(cgroup, 256 * MiB) == -9
    cgroup.rmdir()
    deadline = time.monotonic() + 5.0  # polled: a kernel counter, with no event to wait on
    while notices.undecided() and time.monotonic() < deadline:
        time.sleep(0.01)
    assert notices.seen()
    assert not notices.undecided()


def test_a_removal_alone_stays_undecided_and_unseen(cgroup: Path, notices: OomNotices) -> None:
    cgroup.rmdir()
    deadline = time.monotonic() + 5.0  # polled: a kernel counter, with no event to wait on
    while not notices.undecided() and time.monotonic() < deadline:
        time.sleep(0.01)
    assert notices.undecided()  # the one signal, the removal's
    assert not notices.seen()
