"""`Actor`: the base class users subclass, and `@handler`, which routes message types to methods.

An actor is state plus handlers. It never runs its own loop: its cell (see `_cell.py`) takes one
message at a time from the mailbox and calls the handler registered for that message's type.
A handler may be a plain function or a coroutine function; what it returns is the reply to an
`ask` (and is ignored for a `tell`).

    class Counter(Actor):
        def __init__(self) -> None:
            self.total = 0

        @handler
        def add(self, msg: Add) -> None:
            self.total += msg.amount

        @handler
        async def read(self, msg: Read) -> int:
            return self.total
"""

from __future__ import annotations

import inspect
import types
import typing
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar, Union, overload

import structlog

if TYPE_CHECKING:
    from runtime.ref import ActorRef
    from runtime.system import ActorSystem

__all__ = ["Actor", "handler"]

F = TypeVar("F", bound=Callable[..., Any])

_HANDLES_ATTR = "__roost_handles__"


class HandlerSpec:
    """A resolved handler: the function and whether it must be awaited."""

    __slots__ = ("func", "is_async", "name")

    def __init__(self, func: Callable[..., Any]) -> None:
        self.func = func
        self.is_async = inspect.iscoroutinefunction(func)
        self.name = func.__name__


@overload
def handler(func: F, /) -> F: ...
@overload
def handler(*message_types: type) -> Callable[[F], F]: ...
def handler(*message_types: Any) -> Any:
    """Mark a method as the handler of one or more message types.

    Use it bare, and the type comes from the annotation of the message parameter (a union
    registers each member), or pass the types explicitly: ``@handler(Add, Sub)``. Explicit types
    are needed when the annotation cannot be resolved at class creation (a message class defined
    inside a function, under ``from __future__ import annotations``).
    """
    if len(message_types) == 1 and inspect.isfunction(message_types[0]):
        func = message_types[0]
        setattr(func, _HANDLES_ATTR, ())
        return func

    def mark(func: F) -> F:
        setattr(func, _HANDLES_ATTR, message_types)
        return func

    return mark


def _annotated_message_types(func: Callable[..., Any], owner: type) -> tuple[type, ...]:
    params = list(inspect.signature(func).parameters)
    if len(params) != 2:
        raise TypeError(f"{owner.__name__}.{func.__name__}: a handler takes (self, message)")
    try:
        hints = typing.get_type_hints(func)
    except NameError as exc:
        raise TypeError(
            f"{owner.__name__}.{func.__name__}: cannot resolve the message annotation ({exc}); "
            "name the type explicitly with @handler(MessageType)"
        ) from None
    annotation = hints.get(params[1])
    if annotation is None:
        raise TypeError(
            f"{owner.__name__}.{func.__name__}: annotate the message parameter or use "
            "@handler(MessageType)"
        )
    if typing.get_origin(annotation) in (Union, types.UnionType):
        return typing.get_args(annotation)
    return (annotation,)


class Actor:
    """Base class of every actor. Subclass it and declare handlers with `@handler`.

    The runtime sets `ref`, `name` and `system` before `on_start` runs. A fresh instance is made
    by the factory on every (re)start, so state does not survive a crash; the mailbox does.
    """

    _handlers: ClassVar[dict[type, HandlerSpec]] = {}
    #: Seconds one handler call may take before the watchdog reports it (None: the system's).
    handler_budget_s: ClassVar[float | None] = None

    ref: ActorRef
    name: str
    system: ActorSystem
    log: structlog.stdlib.BoundLogger

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        table: dict[type, HandlerSpec] = {}
        for base in reversed(cls.__mro__[1:]):
            table.update(getattr(base, "_handlers", {}))
        for attr in cls.__dict__.values():
            declared = getattr(attr, _HANDLES_ATTR, None)
            if declared is None:
                continue
            message_types = declared or _annotated_message_types(attr, cls)
            for message_type in message_types:
                if not isinstance(message_type, type):
                    raise TypeError(f"{cls.__name__}: {message_type!r} is not a message class")
                table[message_type] = HandlerSpec(attr)
        cls._handlers = table

    async def on_start(self) -> None:
        """Called before the first message of each (re)start. A raise counts as a crash."""

    async def on_stop(self) -> None:
        """Called once the actor stops serving, after a normal stop or a crash."""

    def stop(self) -> None:
        """Finish the current message, then stop normally (not restarted unless permanent)."""
        self._stop_requested = True

    _stop_requested: bool = False

    @classmethod
    def handler_for(cls, message_type: type) -> HandlerSpec | None:
        """The handler for `message_type`, looking through its base classes; None if none."""
        spec = cls._handlers.get(message_type)
        if spec is None:
            for base in message_type.__mro__[1:]:
                spec = cls._handlers.get(base)
                if spec is not None:
                    cls._handlers[message_type] = spec
                    break
        return spec
