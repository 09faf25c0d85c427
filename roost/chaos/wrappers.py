"""Fault-injecting wrappers around a sandbox and an action source."""

from __future__ import annotations

import contextlib
import os
import random
import signal
from collections.abc import Callable, Mapping
from types import TracebackType
from typing import Self

import aiodocker
import anyio
import msgspec
import structlog

from actors.rollouts import RolloutRequest
from actors.sandbox_worker import Action, ActionSource
from roost.chaos.spec import ChaosSpec
from sandboxes._errors import SandboxBrokenError
from sandboxes._protocol import Command, Sandbox
from sandboxes._spec import ExecResult, SandboxSpec

__all__ = ["ChaosActions", "ChaosCounts", "ChaosSandbox", "InjectedFault", "kill_from_outside"]

_log = structlog.get_logger("roost.chaos")
DOCKER_CALL_S = 30.0


class InjectedFault(RuntimeError):
    """A failure caused by chaos mode, never by a bug."""


class ChaosCounts(msgspec.Struct, kw_only=True):
    """How many faults of each kind were injected."""

    kill_sandbox: int = 0
    remove_container: int = 0
    hung_exec: int = 0
    slow_exec: int = 0
    generator_error: int = 0
    verifier_error: int = 0
    restart_docker: int = 0
    # Outcomes, not faults: a restart whose daemon did not come back is a broken host.
    restart_docker_failed: int = 0

    def as_dict(self) -> dict[str, int]:
        return msgspec.structs.asdict(self)


class ChaosSandbox:
    """A `Sandbox` whose execs are sometimes killed, hung or slowed, as `spec` says.

    A kill is real where the backend allows: SIGKILL to the process sandbox's bubblewrap (its
    namespace dies with it) or to the container; `remove_container` is `docker rm -f`. The exec
    then meets the dead sandbox and the backend reports it as it would any crash. A sandbox
    with nothing to kill (sim) is closed instead. A hung exec never returns, so only the
    caller's deadline ends it.
    """

    def __init__(
        self,
        inner: Sandbox,
        spec: ChaosSpec,
        rng: random.Random,
        counts: ChaosCounts,
        *,
        active: Callable[[], bool] = lambda: True,
    ) -> None:
        self._inner = inner
        self._chaos = spec
        self._rng = rng
        self._counts = counts
        self._active = active  # e.g. only during a training run's RL phase

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
        if not self._active():
            return await self._inner.exec(cmd, stdin=stdin, timeout=timeout, env=env, cwd=cwd)
        chaos, draw = self._chaos, self._rng.random()
        if draw < chaos.kill_sandbox + chaos.remove_container:
            remove = draw >= chaos.kill_sandbox
            if remove:
                self._counts.remove_container += 1
            else:
                self._counts.kill_sandbox += 1
            kind = "remove_container" if remove else "kill_sandbox"
            _log.warning("chaos.fault", kind=kind, sandbox=self.id)
            if not await kill_from_outside(self._inner, remove=remove):
                await self._inner.close()
                return ExecResult.infra(
                    SandboxBrokenError(f"{self.id}: killed under the run (chaos)")
                )
        elif draw < chaos.kill_sandbox + chaos.remove_container + chaos.hung_exec:
            self._counts.hung_exec += 1
            _log.warning("chaos.fault", kind="hung_exec", sandbox=self.id)
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


async def kill_from_outside(sandbox: Sandbox, *, remove: bool) -> bool:
    """Kill `sandbox` as an outside event would (the OOM killer, an operator, `docker rm -f`).

    Reaches into the backends' private handles on purpose: no backend offers a way to be
    killed, and none should. Returns False when there is nothing to kill (a sim sandbox).
    """
    process = getattr(sandbox, "_proc", None)
    if process is not None and process.returncode is None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(process.pid, signal.SIGKILL)
        return True
    container = getattr(sandbox, "_container", None)
    if container is not None:
        try:
            with anyio.fail_after(DOCKER_CALL_S):
                if remove:
                    await container.delete(force=True)
                else:
                    await container.kill(signal="SIGKILL")
        except (aiodocker.DockerError, TimeoutError, OSError) as exc:
            _log.warning("chaos.kill_failed", sandbox=sandbox.id, error=str(exc))
        return True
    return False


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
