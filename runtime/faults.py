"""Fault injection: crash actors on purpose, at seeded rates, to prove supervision holds up.

`CrashInjector` is consulted before each handler call of every actor of a system built with
`ActorSystem(fault_injector=...)`. A chosen message crashes the actor exactly as a failing
handler would: the message goes to the dead letters, the supervisor restarts the actor. The cost
when no injector is set is one `is None` test per message.
"""

from __future__ import annotations

import random
import re
from collections.abc import Mapping

__all__ = ["CrashInjector", "InjectedCrash", "actor_role"]

_INSTANCE_SUFFIX = re.compile(r"[-_.]?\d+$")


def actor_role(name: str) -> str:
    """An actor's name without its instance number: `worker-12` and `worker-3` are `worker`."""
    return _INSTANCE_SUFFIX.sub("", name) or name


class InjectedCrash(Exception):
    """An actor crash caused by fault injection, never by a bug."""


class CrashInjector:
    """Crash actors of a role with a given probability per message.

    `rates` maps a role to a probability in [0, 1]; an actor's role is its name without a
    trailing instance number (`worker-12` is a `worker`). Only the message types that are not in
    `spare` can crash an actor (for example the runtime's own control messages).

    `first_by` makes coverage certain rather than likely: a role that has not crashed by its
    `first_by`-th eligible message crashes on that one. (A test that must see every role
    crash would otherwise depend on how many messages a role happened to get.)
    """

    def __init__(
        self,
        rates: Mapping[str, float],
        *,
        seed: int = 0,
        spare: tuple[type, ...] = (),
        first_by: int | None = None,
    ) -> None:
        for role, rate in rates.items():
            if not 0.0 <= rate <= 1.0:
                raise ValueError(f"crash rate for {role!r} must be in [0, 1], got {rate!r}")
        if first_by is not None and first_by < 1:
            raise ValueError(f"first_by must be >= 1, got {first_by!r}")
        self.rates = dict(rates)
        self.spare = spare
        self.first_by = first_by
        self.crashes: dict[str, int] = {}
        self._seen: dict[str, int] = {}
        self._rng = random.Random(seed)

    def __call__(self, actor_name: str, message: object) -> bool:
        role = actor_role(actor_name)
        rate = self.rates.get(role)
        if not rate or isinstance(message, self.spare):
            return False
        seen = self._seen[role] = self._seen.get(role, 0) + 1
        overdue = self.first_by is not None and seen >= self.first_by and role not in self.crashes
        if not overdue and self._rng.random() >= rate:
            return False
        self.crashes[role] = self.crashes.get(role, 0) + 1
        return True
