"""Every exception the actor runtime raises, in one place.

The tree says who failed::

    RoostError
    ├── ActorError                  an actor could not take or answer a message
    │   ├── ActorStoppedError       you sent to an actor whose mailbox is closed
    │   ├── AskTimeoutError         the actor did not answer within the deadline
    │   ├── ActorCrashedError       the actor's handler raised while answering your ask
    │   └── UnhandledMessageError   the actor has no handler for that message type
    ├── SupervisionError
    │   └── EscalationError         a supervisor exceeded its restart intensity
    └── MessageDecodeError          bytes that are not a valid message (names the field path)

Infrastructure, agent and evaluation failures (the RL failure taxonomy) live with the packages
that own them; the runtime knows nothing of RL.
"""

from __future__ import annotations


class RoostError(Exception):
    """Base class of every error roost raises on purpose."""


class ActorError(RoostError):
    """An actor could not take or answer a message."""


class ActorStoppedError(ActorError):
    """The actor's mailbox is closed: it is stopping or has stopped."""


class AskTimeoutError(ActorError, TimeoutError):
    """An `ask` got no reply before its deadline. Nothing is left pending."""


class ActorCrashedError(ActorError):
    """The handler answering an `ask` raised; the original error is the `__cause__`."""


class UnhandledMessageError(ActorError):
    """The actor has no handler for this message type."""


class SupervisionError(RoostError):
    """Supervision could not keep a subtree running."""


class EscalationError(SupervisionError):
    """A supervisor restarted its children more often than allowed and gave up.

    Raised out of the parent's supervision; at the root it ends the `ActorSystem`.
    """


class MessageDecodeError(RoostError, ValueError):
    """Bytes that do not decode to the expected message type; the text names the field path."""
