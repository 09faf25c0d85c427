"""roost's actor runtime: actors, mailboxes, supervision, timers, clocks and metrics.

It knows nothing of reinforcement learning. Everything public is re-exported here.
"""

from runtime._cell import Restart
from runtime.actor import Actor, handler
from runtime.clock import VirtualClockEventLoop, now
from runtime.deadletters import DeadLetter, DeadLetterOffice
from runtime.errors import (
    ActorCrashedError,
    ActorError,
    ActorStoppedError,
    AskTimeoutError,
    EscalationError,
    MessageDecodeError,
    RoostError,
    SupervisionError,
    UnhandledMessageError,
)
from runtime.logs import configure_logging
from runtime.messages import Message, MessageDecoder, decode, encode
from runtime.metrics import Counter, Gauge, Histogram, MetricsRegistry
from runtime.ref import ActorRef
from runtime.runner import run
from runtime.supervision import Strategy, Supervisor
from runtime.system import ActorSystem, StopReport, SystemStatistics
from runtime.timers import Timer

__all__ = [
    "Actor",
    "ActorCrashedError",
    "ActorError",
    "ActorRef",
    "ActorStoppedError",
    "ActorSystem",
    "AskTimeoutError",
    "Counter",
    "DeadLetter",
    "DeadLetterOffice",
    "EscalationError",
    "Gauge",
    "Histogram",
    "Message",
    "MessageDecodeError",
    "MessageDecoder",
    "MetricsRegistry",
    "Restart",
    "RoostError",
    "StopReport",
    "Strategy",
    "SupervisionError",
    "Supervisor",
    "SystemStatistics",
    "Timer",
    "UnhandledMessageError",
    "VirtualClockEventLoop",
    "configure_logging",
    "decode",
    "encode",
    "handler",
    "now",
    "run",
]
