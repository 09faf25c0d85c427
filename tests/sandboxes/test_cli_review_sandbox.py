"""`roost sandbox` on bad options: an unknown runtime or log level is a usage error, never a
command run anyway or a KeyError traceback."""

from __future__ import annotations

import pytest

from tests.sandboxes.test_cli import _run


@pytest.mark.parametrize("backend", ["process", "docker"])
def test_an_unknown_runtime_is_a_usage_error_on_every_backend(backend: str) -> None:
    code, out, err = _run("run", "--backend", backend, "--runtime", "cobol", "--", "true")
    assert code == 2
    assert out == ""  # nothing ran
    assert "--runtime" in err
    assert "'python'" in err


def test_an_unknown_log_level_is_a_usage_error() -> None:
    code, out, err = _run("--log-level", "bogus", "run", "--", "true")
    assert code == 2
    assert out == ""
    assert "--log-level" in err
