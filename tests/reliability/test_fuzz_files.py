"""Fuzzing the file upload paths: the static check (sandboxes/_files.py) and put_file/get_file on
the process backend with hostile paths: `..`, absolute paths, planted symlinks, NUL bytes,
unencodable and huge names.

Each hostile path is refused with `UnsafePathError` (or, for a plain name that is not there,
`SandboxFileError`), naming the path; a path that is accepted lands inside the work directory,
as the sandbox itself resolves it. Nothing is written outside, and the sandbox keeps working.
"""

from __future__ import annotations

import os
import posixpath
import secrets
from typing import Any

import anyio
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sandboxes import SandboxSpec
from sandboxes._errors import SandboxFileError, UnsafePathError
from sandboxes._files import MAX_NAME_BYTES, MAX_PATH_BYTES, check_relative_path
from sandboxes.factory import create_sandbox
from tests.reliability.conftest import FUZZ
from tests.sandboxes.conftest import require_backend

SYMLINKS = "ln -s / up && ln -s /etc/passwd pw && mkdir d && ln -s ../.. d/out && ln -s loop loop"
segments = st.sampled_from(
    ["..", ".", "", "up", "pw", "d", "out", "loop", "x", "etc", "tmp", "\0", "é", "-rf", "*"]
)
hostile_paths = st.one_of(
    st.tuples(st.booleans(), st.lists(segments, min_size=1, max_size=5)).map(
        lambda t: ("/" if t[0] else "") + "/".join(t[1])
    ),
    st.text(max_size=40),
)


@FUZZ
@given(path=st.text(max_size=300) | hostile_paths)
def test_fuzz_files_static_check_accepts_only_paths_inside(path: str) -> None:
    try:
        norm = check_relative_path(path)
    except UnsafePathError as exc:
        error = str(exc)
    else:
        error = ""
    if error:
        assert error.startswith("path ")
        assert len(error) < 300  # a huge name is cut, not echoed back whole
        return
    joined = posixpath.normpath(posixpath.join("/work", norm))
    assert joined.startswith("/work/")
    assert ".." not in norm.split("/")
    assert "\0" not in norm
    assert not norm.startswith("/")


@pytest.mark.parametrize(
    ("path", "reason"),
    [
        ("", "non-empty"),
        (".", "work directory itself"),
        ("./", "work directory itself"),
        ("..", "'..'"),
        ("a/../../x", "'..'"),
        ("/etc/passwd", "absolute"),
        ("a\0b", "NUL"),
        ("\ud800", "not encodable"),
        ("x" * (MAX_NAME_BYTES + 1), "longer than 255"),
        ("é" * 128, "a name of 256 bytes"),
        ("a/" * 2000, f"longer than {MAX_PATH_BYTES}"),
        ("b" * 200_000, f"longer than {MAX_PATH_BYTES}"),
    ],
)
def test_fuzz_files_static_corpus_each_gets_a_clear_error(path: str, reason: str) -> None:
    with pytest.raises(UnsafePathError, match=reason):
        check_relative_path(path)


async def _attempt(paths: list[str], marker: bytes) -> None:
    spec = SandboxSpec(backend="process")
    async with create_sandbox(spec) as sb:
        (await sb.exec(["sh", "-c", SYMLINKS])).raise_for_infra()
        for path in paths:
            put_error = get_error = ""
            try:
                await sb.put_file(path, marker)
            except (UnsafePathError, SandboxFileError) as exc:
                put_error = str(exc)
            else:
                # Accepted: the sandbox's own view puts it under the work directory.
                where = await sb.exec(["realpath", "-m", "--", f"{spec.workdir}/{path}"])
                assert where.stdout.decode().startswith(f"{spec.workdir}/")
                assert await sb.get_file(path) == marker
            try:
                data = await sb.get_file(path)
            except (UnsafePathError, SandboxFileError) as exc:
                get_error = str(exc)
            else:
                assert data == marker
            assert not put_error or put_error.startswith(("path ", "cannot write "))
            assert not get_error or get_error.startswith(("path ", "cannot read "))
        # Whatever happened, nothing of ours is outside, and the sandbox still answers.
        leaked = await sb.exec(["grep", "-rlsF", marker.decode(), "/etc", "/tmp", "/var/tmp"])
        assert leaked.stdout == b""
        assert (await sb.exec(["echo", "alive"])).stdout == b"alive\n"


# A sandbox per example is slow (about 0.8 s as root: cgroups, a tmpfs): few examples, each a
# batch of paths tried on one sandbox.
@settings(FUZZ, max_examples=int(os.environ.get("ROOST_FUZZ_SANDBOX_EXAMPLES", "12")))
@given(paths=st.lists(hostile_paths, min_size=1, max_size=10))
def test_fuzz_files_process_backend_put_and_get_with_hostile_paths(paths: list[str]) -> None:
    require_backend("process")
    marker = f"roost-fuzz-{secrets.token_hex(6)}".encode()
    with open("/etc/passwd", "rb") as before:
        host_passwd = before.read()
    anyio.run(_attempt, paths, marker)
    with open("/etc/passwd", "rb") as after:
        assert after.read() == host_passwd


@pytest.mark.parametrize(
    "path",
    ["../x", "/etc/x", "up/tmp/x", "up/etc/passwd", "pw", "d/out/x", "a\0b", "\ud800"],
)
def test_fuzz_files_process_backend_refuses_every_escape(path: str) -> None:
    require_backend("process")

    async def attempt() -> Any:
        async with create_sandbox(SandboxSpec(backend="process")) as sb:
            (await sb.exec(["sh", "-c", SYMLINKS])).raise_for_infra()
            with pytest.raises(UnsafePathError) as put:
                await sb.put_file(path, b"x")
            with pytest.raises((UnsafePathError, SandboxFileError)) as get:
                await sb.get_file(path)
            return put.value, get.value

    put, get = anyio.run(attempt)
    for error in (put, get):
        assert "path" in str(error)


def test_fuzz_files_process_backend_symlink_loop_is_a_file_error_naming_it() -> None:
    require_backend("process")

    async def attempt() -> str:
        async with create_sandbox(SandboxSpec(backend="process")) as sb:
            (await sb.exec(["sh", "-c", SYMLINKS])).raise_for_infra()
            with pytest.raises(SandboxFileError) as put:
                await sb.put_file("loop/x", b"x")
            assert (await sb.exec(["echo", "alive"])).stdout == b"alive\n"
            return str(put.value)

    message = anyio.run(attempt)
    assert "'loop/x'" in message
    assert "symbolic links" in message
