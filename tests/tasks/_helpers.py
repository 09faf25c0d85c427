"""Shared pieces of the task tests: a small task, a real bubblewrap sandbox, fakes."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Mapping

from sandboxes._errors import SandboxBrokenError
from sandboxes._protocol import Command
from sandboxes._spec import ExecResult, SandboxSpec
from sandboxes.process import ProcessSandbox
from tasks import Task, TestCase

ADD_ONE = Task(
    id="add-one",
    prompt="def f(x):\n",
    prefix="def f(x):\n",
    entry_point="f",
    tests=[
        TestCase(call="f(1)", expected="2"),
        TestCase(call="f(-5)", expected="-4"),
        TestCase(call="f(10)", expected="11"),
    ],
    canonical_solution="    return x + 1\n",
    timeout_s=1.0,
)


@contextlib.asynccontextmanager
async def real_sandbox() -> AsyncIterator[ProcessSandbox]:
    async with ProcessSandbox(SandboxSpec(backend="process")) as sandbox:
        yield sandbox


class FakeSandbox:
    """A sandbox whose execs fail the way a test needs; files are kept in a dict."""

    def __init__(
        self,
        *,
        exec_result: ExecResult | None = None,
        hang: bool = False,
        broken_files: bool = False,
    ) -> None:
        self.exec_result = exec_result or ExecResult.infra(SandboxBrokenError("container died"))
        self.hang = hang
        self.broken_files = broken_files
        self.files: dict[str, bytes] = {}
        self._spec = SandboxSpec(backend="sim")

    @property
    def id(self) -> str:
        return "fake"

    @property
    def spec(self) -> SandboxSpec:
        return self._spec

    async def start(self) -> None:
        pass

    async def exec(
        self,
        cmd: Command,
        *,
        stdin: bytes | None = None,
        timeout: float | None = None,
        env: Mapping[str, str] | None = None,
        cwd: str | None = None,
    ) -> ExecResult:
        if self.hang:
            import anyio

            await anyio.sleep_forever()
        return self.exec_result

    async def put_file(self, path: str, data: bytes, *, mode: int = 0o644) -> None:
        if self.broken_files:
            raise SandboxBrokenError("the daemon lost the container")
        self.files[path] = data

    async def get_file(self, path: str) -> bytes:
        return self.files[path]

    async def reset(self) -> None:
        self.files.clear()

    async def close(self) -> None:
        pass

    async def __aenter__(self) -> FakeSandbox:
        return self

    async def __aexit__(self, *exc: object) -> None:
        pass
