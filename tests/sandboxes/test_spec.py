"""Specs, sizes, results, output capping and path rules: the data the backends share."""

from __future__ import annotations

import types

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

import sandboxes
from sandboxes import (
    ExecResult,
    InfraFailure,
    SandboxBrokenError,
    SandboxConfigError,
    SandboxInfraError,
    SandboxSpec,
    UnsafePathError,
    load_spec,
    parse_size,
)
from sandboxes._files import check_relative_path
from sandboxes._output import CappedBuffer


@pytest.mark.parametrize(
    ("text", "expected"),
    [("256m", 256 * 2**20), ("1g", 2**30), ("64MiB", 64 * 2**20), ("512", 512), ("1.5k", 1536)],
)
def test_sizes_parse_with_binary_units(text: str, expected: int) -> None:
    assert parse_size(text) == expected


@pytest.mark.parametrize("bad", ["", "m", "12q", "-5m", "0", "ten"])
def test_malformed_size_names_the_field_and_the_value(bad: str) -> None:
    with pytest.raises(SandboxConfigError, match=r"memory: .*") as info:
        parse_size(bad, what="memory")
    assert (
        repr(bad) in str(info.value) or "positive" in str(info.value) or "byte" in str(info.value)
    )


def test_spec_from_a_mapping_accepts_human_sizes() -> None:
    spec = load_spec({"backend": "process", "memory": "128m", "disk": "32m", "pids": 32})
    assert (spec.memory, spec.disk, spec.pids, spec.network) == (128 * 2**20, 32 * 2**20, 32, False)


@pytest.mark.parametrize(
    ("data", "field"),
    [
        ({"backend": "kvm"}, "backend"),
        ({"pids": 2}, "pids"),
        ({"workdir": "work"}, "workdir"),
        ({"user": "root"}, "user"),
        ({"user": "1000\n"}, "user"),
        ({"user": "1000:1000\n"}, "user"),
        ({"memory": "lots"}, "memory"),
        ({"cpu": 2}, "cpu"),
        ({"cpus": 0.005}, "cpus"),
        ({"cpus": 0}, "cpus"),
    ],
)
def test_invalid_spec_errors_name_the_field(data: dict[str, object], field: str) -> None:
    with pytest.raises(SandboxConfigError, match=field):
        load_spec(data)


def test_exec_result_round_trips_through_msgpack_with_exact_bytes() -> None:
    result = ExecResult(exit_code=1, stdout=b"\xff\x00ok", stderr=b"e", duration_s=0.5)
    assert msgspec.msgpack.decode(msgspec.msgpack.encode(result), type=ExecResult) == result


def test_infra_failure_is_data_that_raises_its_exception_type() -> None:
    result = ExecResult.infra(SandboxBrokenError("container died"))
    assert result.exit_code is None
    assert not result.ok
    assert result.infra_error == InfraFailure(kind="sandbox_broken", message="container died")
    with pytest.raises(SandboxBrokenError, match="container died"):
        result.raise_for_infra()
    assert issubclass(SandboxBrokenError, SandboxInfraError)


@given(st.lists(st.binary(max_size=300), max_size=20), st.integers(min_value=0, max_value=1000))
def test_capped_buffer_keeps_an_exact_prefix_and_flags_the_rest(
    chunks: list[bytes], limit: int
) -> None:
    buf = CappedBuffer(limit)
    for chunk in chunks:
        buf.feed(chunk)
    whole = b"".join(chunks)
    assert buf.value() == whole[:limit]
    assert buf.truncated == (len(whole) > limit)


@pytest.mark.parametrize("path", ["../x", "a/../../x", "/etc/passwd", "", ".", "a/\0b", "x/.."])
def test_unsafe_relative_paths_are_refused(path: str) -> None:
    with pytest.raises(UnsafePathError):
        check_relative_path(path)


def test_plain_relative_paths_are_normalized() -> None:
    assert check_relative_path("a//b/./c.txt") == "a/b/c.txt"


def test_public_names_are_exactly_the_exported_ones() -> None:
    # Submodules appear as attributes once any test imports them, so they are not names.
    public = {
        n
        for n in dir(sandboxes)
        if not n.startswith("_") and not isinstance(getattr(sandboxes, n), types.ModuleType)
    }
    assert public == set(sandboxes.__all__)


def test_spec_is_frozen() -> None:
    spec = SandboxSpec()
    with pytest.raises(AttributeError):
        spec.memory = 1  # type: ignore[misc]
