"""The chaos specification: which faults, at which rates, from which seed."""

from __future__ import annotations

import math

import msgspec

__all__ = ["ChaosSpec", "ChaosSpecError", "parse_chaos"]


class ChaosSpecError(ValueError):
    """A `--chaos` string that does not say something roost can do."""


class ChaosSpec(msgspec.Struct, frozen=True, kw_only=True):
    """Probabilities per event: per exec for sandbox faults, per action for the generator, per
    message for actor crashes (`crashes` maps an actor role such as `worker` to a rate)."""

    kill_sandbox: float = 0.0  # the sandbox's processes killed (SIGKILL) from outside
    remove_container: float = 0.0  # the container removed under the run (Docker backends)
    hung_exec: float = 0.0
    slow_exec: float = 0.0
    slow_exec_s: float = 2.0
    generator_error: float = 0.0
    verifier_error: float = 0.0  # per verification: the verifier raises
    restart_docker: list[float] = msgspec.field(default_factory=list)  # seconds into the phase
    crashes: dict[str, float] = msgspec.field(default_factory=dict)
    # Each crashed role crashes at the latest on its Nth message (certain coverage in tests).
    crash_first_by: int | None = None
    seed: int = 0

    @property
    def exec_fault_rate(self) -> float:
        return self.kill_sandbox + self.remove_container + self.hung_exec + self.slow_exec

    @property
    def needs_docker(self) -> bool:
        return self.remove_container > 0 or bool(self.restart_docker)


_RATES = (
    "kill_sandbox",
    "remove_container",
    "hung_exec",
    "slow_exec",
    "generator_error",
    "verifier_error",
)


def parse_chaos(text: str, *, crashable: frozenset[str] | None = None) -> ChaosSpec:
    """Parse `kind=value,...`; kinds: kill_sandbox, remove_container, hung_exec, slow_exec,
    generator_error, verifier_error (rates in [0, 1]), slow_exec_s (seconds), restart_docker
    (seconds into the run; repeat it for more restarts), seed, crash.ROLE (a rate) and
    crash_first_by (a message count: every crash.ROLE crashes at least once by then).
    `crashable` limits the roles a command can restart without losing state."""
    fields: dict[str, float | int] = {}
    crashes: dict[str, float] = {}
    restarts: list[float] = []
    for item in filter(None, (part.strip() for part in text.split(","))):
        key, sep, raw = item.partition("=")
        key = key.strip()
        if not sep:
            raise ChaosSpecError(f"chaos item {item!r}: expected KIND=VALUE")
        try:
            value = float(raw)
        except ValueError:
            raise ChaosSpecError(f"chaos item {item!r}: {raw.strip()!r} is not a number") from None
        if not math.isfinite(value):  # no rate, count, seed or delay is infinite (int() raises)
            raise ChaosSpecError(f"chaos item {item!r}: {raw.strip()!r} is not a finite number")
        if key.startswith("crash."):
            role = key.removeprefix("crash.")
            if crashable is not None and role not in crashable:
                raise ChaosSpecError(
                    f"chaos item {item!r}: actors of role {role!r} cannot be crashed here "
                    f"(crashable: {', '.join(sorted(crashable)) or 'none'})"
                )
            crashes[role] = _rate(item, value)
        elif key in _RATES:
            fields[key] = _rate(item, value)
        elif key == "restart_docker":
            if not value >= 0:
                raise ChaosSpecError(f"chaos item {item!r}: seconds must be >= 0")
            restarts.append(value)
        elif key == "slow_exec_s":
            if not value >= 0:
                raise ChaosSpecError(f"chaos item {item!r}: seconds must be >= 0")
            fields[key] = value
        elif key == "seed":
            fields[key] = int(value)
        elif key == "crash_first_by":
            if not (value >= 1 and value.is_integer()):
                raise ChaosSpecError(
                    f"chaos item {item!r}: a message count must be an integer >= 1"
                )
            fields[key] = int(value)
        else:
            known = ", ".join(
                (*_RATES, "slow_exec_s", "restart_docker", "seed", "crash.ROLE", "crash_first_by")
            )
            raise ChaosSpecError(f"chaos item {item!r}: unknown kind {key!r} (known: {known})")
    spec = ChaosSpec(crashes=crashes, restart_docker=sorted(restarts), **fields)  # type: ignore[arg-type]
    if spec.exec_fault_rate > 1.0:
        raise ChaosSpecError(
            "kill_sandbox + remove_container + hung_exec + slow_exec is "
            f"{spec.exec_fault_rate}, more than 1"
        )
    return spec


def _rate(item: str, value: float) -> float:
    if not 0.0 <= value <= 1.0:
        raise ChaosSpecError(f"chaos item {item!r}: a rate must be in [0, 1]")
    return value
