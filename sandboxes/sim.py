"""The `sim` backend: no processes at all. Latencies and faults are drawn from seeded
distributions, so schedulers and pools can be stress-tested with thousands of sandboxes, under a
real or a virtual clock (it only ever waits with `anyio.sleep`).

What an exec "prints" comes from a `responder` (argv, stdin -> ExecResult); the default answers
exit 0 with no output. Files live in a dict, behind the same path rules as the real backends.
"""

from __future__ import annotations

import random
from collections.abc import Callable

import anyio
import msgspec

from runtime.distributions import Distribution
from sandboxes._base import BaseSandbox
from sandboxes._errors import SandboxBrokenError, SandboxFileError, SandboxStartError
from sandboxes._files import check_relative_path
from sandboxes._spec import ExecResult, SandboxSpec


class SimProfile(msgspec.Struct, frozen=True, kw_only=True):
    """Latencies and fault rates of simulated sandboxes. The defaults are roughly the measured
    docker/runc figures of this host (start 190 ms, exec 60 ms), with no faults."""

    start: Distribution = Distribution("lognormal", median=0.19, sigma=0.2)
    exec: Distribution = Distribution("lognormal", median=0.06, sigma=0.3)
    reset: Distribution = Distribution("lognormal", median=0.05, sigma=0.3)
    close: Distribution = Distribution("constant", value=0.01)
    start_failure_rate: float = 0.0
    exec_infra_failure_rate: float = 0.0  # the sandbox breaks; later calls fail too
    exec_timeout_rate: float = 0.0  # the program runs into its timeout


Responder = Callable[[list[str], bytes | None], ExecResult]


def _ok(argv: list[str], stdin: bytes | None) -> ExecResult:
    return ExecResult(exit_code=0)


class SimSandbox(BaseSandbox):
    """A `Sandbox` that only pretends. Deterministic for a given `seed`."""

    def __init__(
        self,
        spec: SandboxSpec,
        *,
        profile: SimProfile | None = None,
        seed: int = 0,
        responder: Responder | None = None,
    ) -> None:
        super().__init__(spec)
        self._profile = profile or SimProfile()
        self._rng = random.Random(seed)
        self._respond = responder or _ok
        self._files: dict[str, bytes] = {}

    async def _start(self) -> None:
        await anyio.sleep(self._profile.start.sample(self._rng))
        if self._rng.random() < self._profile.start_failure_rate:
            raise SandboxStartError("simulated start failure")

    async def _run(
        self,
        argv: list[str],
        *,
        stdin: bytes | None,
        timeout: float,
        env: dict[str, str],
        cwd: str,
        output_limit: int,
        agent: bool = False,
    ) -> ExecResult:
        latency = self._profile.exec.sample(self._rng)
        if self._rng.random() < self._profile.exec_infra_failure_rate:
            await anyio.sleep(latency)
            self._mark_broken("simulated infrastructure failure")
            return ExecResult.infra(SandboxBrokenError("simulated infrastructure failure"))
        if latency >= timeout or self._rng.random() < self._profile.exec_timeout_rate:
            await anyio.sleep(timeout)
            return ExecResult(exit_code=None, timed_out=True, signal=9, duration_s=timeout)
        await anyio.sleep(latency)
        answer = self._respond(argv, stdin)
        return msgspec.structs.replace(
            answer,
            stdout=answer.stdout[:output_limit],
            stderr=answer.stderr[:output_limit],
            stdout_truncated=answer.stdout_truncated or len(answer.stdout) > output_limit,
            stderr_truncated=answer.stderr_truncated or len(answer.stderr) > output_limit,
            duration_s=latency,
        )

    async def put_file(self, path: str, data: bytes, *, mode: int = 0o644) -> None:
        rel = check_relative_path(path)
        self._require_started()
        self._files[rel] = bytes(data)

    async def get_file(self, path: str) -> bytes:
        rel = check_relative_path(path)
        self._require_started()
        try:
            return self._files[rel]
        except KeyError:
            raise SandboxFileError(f"cannot read {path!r}: no such file") from None

    async def _reset(self) -> None:
        await anyio.sleep(self._profile.reset.sample(self._rng))
        self._files.clear()

    async def _close(self) -> None:
        self._files.clear()
        await anyio.sleep(self._profile.close.sample(self._rng))
