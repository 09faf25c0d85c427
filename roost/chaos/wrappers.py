"""Fault-injecting wrappers around a sandbox and an action source."""

from __future__ import annotations

import random
from collections.abc import Mapping
from types import TracebackType
from typing import Self

import anyio
import msgspec

from actors.rollouts import RolloutRequest
from actors.sandbox_worker import Action, ActionSource
from roost.chaos.spec import ChaosSpec
from sandboxes._errors import SandboxBrokenError
from sandboxes._protocol import Command, Sandbox
from sandboxes._spec import ExecResult, SandboxSpec

__all__ = ["ChaosActions", "ChaosCounts", "ChaosSandbox", "InjectedFault"]


class InjectedFault(RuntimeError):
    """A failure caused by chaos mode, never by a bug."""


class ChaosCounts(msgspec.Struct, kw_only=True):
    """How many faults of each kind were injected."""

    kill_sandbox: int = 0
    hung_exec: int = 0
    slow_exec: int = 0
    generator_error: int = 0

    def as_dict(self) -> dict[str, int]:
        return msgspec.structs.asdict(self)


class ChaosSandbox:
    """A `Sandbox` whose execs are sometimes killed, hung or slowed, as `spec` says.

    A kill destroys the sandbox under the exec (as `kill -9` of its processes or `docker rm -f`
    would); a hung exec never returns, so only the caller's deadline ends it.
    """

    def __init__(
        self, inner: Sandbox, spec: ChaosSpec, rng: random.Random, counts: ChaosCounts
    ) -> None:
        self._inner = inner
        self._chaos = spec
        self._rng = rng
        self._counts = counts

    @property
    def id(self) -> str:
        return self._inner.id

    @property
    def spec(self) -> SandboxSpec:
        return self._inner.spec

    async def start(self) -> None:
        await self._inner.start()

    async def exec(
        self,
        cmd: Command,
        *,
        stdin: bytes | None = None,
        timeout: float | None = None,
        env: Mapping[str, str] | None = None,
        cwd: str | None = None,
    ) -> ExecResult:
        chaos, draw = self._chaos, self._rng.random()
        if draw < chaos.kill_sandbox:
            self._counts.kill_sandbox += 1
            await self._inner.close()
            return ExecResult.infra(SandboxBrokenError(f"{self.id}: killed under the run (chaos)"))
        elif draw < chaos.kill_sandbox + chaos.hung_exec:
            self._counts.hung_exec += 1
            await anyio.sleep_forever()
        elif draw < chaos.exec_fault_rate:
            self._counts.slow_exec += 1
            await anyio.sleep(chaos.slow_exec_s)
        return await self._inner.exec(cmd, stdin=stdin, timeout=timeout, env=env, cwd=cwd)

    async def put_file(self, path: str, data: bytes, *, mode: int = 0o644) -> None:
        await self._inner.put_file(path, data, mode=mode)

    async def get_file(self, path: str) -> bytes:
        return await self._inner.get_file(path)

    async def reset(self) -> None:
        await self._inner.reset()

    async def close(self) -> None:
        await self._inner.close()

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()


class ChaosActions:
    """An `ActionSource` that sometimes raises instead of answering (a generator failure)."""

    def __init__(
        self, inner: ActionSource, spec: ChaosSpec, rng: random.Random, counts: ChaosCounts
    ) -> None:
        self._inner = inner
        self._rate = spec.generator_error
        self._rng = rng
        self._counts = counts

    async def act(self, request: RolloutRequest, step: int, last: ExecResult | None) -> Action:
        if self._rng.random() < self._rate:
            self._counts.generator_error += 1
            raise InjectedFault(f"injected generator failure ({request.rollout_id}, step {step})")
        return await self._inner.act(request, step, last)
