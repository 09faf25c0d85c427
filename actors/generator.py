"""`Generator`: batches generation requests from many episodes into one model, off the loop.

Requests queue until `max_batch` are waiting or the oldest has waited `max_wait_s`; the batch
then runs in a worker thread, `chunk_tokens` decoding steps per thread call. Each chunk is a
message the actor sends itself, so messages that arrived meanwhile - above all
`WeightsPublished` - are handled between two chunks: the switch lands at a batch boundary, the
sequences in flight carry on with the new weights, and every token keeps the version and the
behaviour log-probability it was sampled with. A sequence that has finished is answered at
the end of the chunk it finished in, not when the whole batch has: its episode can run its
tests while the batch's longest sequences decode. Requests arriving during a batch wait for the
next one (static batching: simple, and on one device the batch stays full under load), or,
with `continuous` and a policy that can (`policies.neural.JoiningPolicy`), join the running
batch at the next chunk boundary, in the rows its answered sequences left (continuous
batching: a request no longer waits for the longest sequence of the batch before it).

`GeneratorClient` is how an episode asks (with a deadline); `ModelActionSource` adapts it to the
`SandboxWorker`'s `ActionSource` seam.
"""

from __future__ import annotations

import collections
import dataclasses
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

import anyio
import anyio.to_thread

from actors.rollouts import RolloutRequest
from actors.sandbox_worker import Action
from policies.neural import Decoding, JoiningPolicy, NeuralPolicy, Sample, use_threads
from policies.staleness import StalenessBook
from policies.tokenizer import ByteTokenizer
from runtime import Actor, ActorRef, Message, handler
from runtime.clock import now as clock_now
from sandboxes._spec import ExecResult

__all__ = [
    "GenerateRequest",
    "GenerationError",
    "Generator",
    "GeneratorClient",
    "GeneratorConfig",
    "GeneratorStatistics",
    "GetGeneratorStatistics",
    "ModelActionSource",
    "Turn",
    "WeightsPublished",
]

T = TypeVar("T")


class GenerationError(RuntimeError):
    """A request was refused (bad input) or its batch failed or ran past the model deadline."""


@dataclasses.dataclass(frozen=True)
class GeneratorConfig:
    max_batch: int = 256
    max_wait_s: float = 0.005
    max_new_tokens: int = 32
    temperature: float = 1.0
    #: Decoding steps per thread call: smaller switches weights sooner, larger costs less.
    chunk_tokens: int = 8
    #: Deadline of one thread call (prompt pass, a chunk, or a weight load).
    compute_timeout_s: float = 120.0
    seed: int = 0
    #: Answer a sequence at the end of the chunk it finished in (False: when its whole batch
    #: has; scripts/bench_batching.py compares the two).
    answer_early: bool = True
    #: Let waiting requests join the running batch between two chunks (continuous batching);
    #: needs a `JoiningPolicy` and answers sequences early.
    continuous: bool = False
    #: torch intra-op threads of the model calls (0: torch's default; `use_threads`).
    threads: int = 0


class _Reply:
    """Where a request's result lands; in-process only (the request is never serialized)."""

    __slots__ = ("error", "event", "sample")

    def __init__(self) -> None:
        self.event = anyio.Event()
        self.sample: Sample | None = None
        self.error: str | None = None


class GenerateRequest(Message):
    prompt: list[int]
    reply: Any


class WeightsPublished(Message):
    """New weights; the reply (to an ask) is the version now served."""

    version: int
    state: Any


class _Step(Message):
    pass


class GetGeneratorStatistics(Message):
    pass


@dataclasses.dataclass(frozen=True)
class GeneratorStatistics:
    version: int
    requests: int
    rejected: int
    batches: int
    tokens: int
    compute_s: float
    mean_occupancy: float
    switches_mid_batch: int
    joins: int = 0  # requests that joined a running batch (continuous batching)


@dataclasses.dataclass
class _Batch:
    """The batch being decoded, and which of its rows have had their answer."""

    decoding: Decoding
    requests: list[GenerateRequest]
    answered: set[int] = dataclasses.field(default_factory=set)

    def answer_finished(self) -> None:
        """Answer every row that has finished and not been answered yet."""
        rows = [i for i in self.decoding.ended() if i not in self.answered]
        if not rows:
            return
        for i, sample in zip(rows, self.decoding.samples(rows), strict=True):
            self.answered.add(i)
            reply = self.requests[i].reply
            reply.sample = sample
            reply.event.set()

    def unanswered(self) -> list[GenerateRequest]:
        return [r for i, r in enumerate(self.requests) if i not in self.answered]


class Generator(Actor):
    """One model, one batch at a time; spawn with a mailbox larger than the episode count."""

    def __init__(self, policy: NeuralPolicy, config: GeneratorConfig | None = None) -> None:
        self.policy = policy
        self.config = config or GeneratorConfig()
        if self.config.continuous and not isinstance(policy, JoiningPolicy):
            raise TypeError(
                f"continuous batching needs a policy with `join`; {type(policy).__name__} has none"
            )
        self._pending: collections.deque[tuple[float, GenerateRequest]] = collections.deque()
        self._running: _Batch | None = None
        self._scheduled = False
        self._lock = threading.Lock()  # an abandoned (timed-out) call must finish first
        self._seq = 0
        self._requests = self._rejected = self._batches = self._tokens = 0
        self._compute_s = 0.0
        self._occupancy_sum = 0.0
        self._mid_batch = 0
        self._joined = 0
        self._first_batch_at: float | None = None

    async def on_start(self) -> None:
        metrics = self.system.metrics
        self._m_tokens = metrics.counter("generator.tokens")
        self._m_joins = metrics.counter("generator.joins")
        self._m_occupancy = metrics.histogram("generator.batch_occupancy")
        self._m_compute = metrics.histogram("generator.compute_s")
        metrics.gauge("generator.version", lambda: float(self.policy.version))
        metrics.gauge("generator.tokens_per_s", self._tokens_per_s)

    def _tokens_per_s(self) -> float:
        """Tokens over wall time since the first batch started (idle time included)."""
        if self._first_batch_at is None:
            return 0.0
        elapsed = time.perf_counter() - self._first_batch_at
        return self._tokens / elapsed if elapsed > 0 else 0.0

    # -- handlers --------------------------------------------------------------------------------

    @handler
    def generate_request(self, msg: GenerateRequest) -> None:
        self._requests += 1
        problem = self._check(msg)
        if problem is not None:
            self._rejected += 1
            if isinstance(msg.reply, _Reply):
                msg.reply.error = problem
                msg.reply.event.set()
            self.log.warning("generate_request_rejected", reason=problem)
            return
        self._pending.append((clock_now(), msg))
        self._schedule()

    @handler
    async def weights_published(self, msg: WeightsPublished) -> int:
        # Refusing bad weights must not crash the actor: a restart would lose every queued
        # request. The reply (the version served) tells the publisher whether it took.
        if not isinstance(msg.state, Mapping):
            self.log.error("weights_refused", reason=f"state is a {type(msg.state).__name__}")
            return self.policy.version
        if msg.version > self.policy.version:
            try:
                await self._compute(self.policy.load_state_dict, msg.state, msg.version)
            except Exception as exc:
                self.log.error("weights_refused", version=msg.version, exc_info=exc)
                return self.policy.version
            if self._running is not None:
                self._mid_batch += 1
        return self.policy.version

    @handler
    async def step(self, msg: _Step) -> None:
        self._scheduled = False
        if self._running is None:
            if not self._pending:
                return
            batch = [
                self._pending.popleft()[1]
                for _ in range(min(len(self._pending), self.config.max_batch))
            ]
            self._seq += 1
            try:
                decoding = await self._compute(
                    self.policy.start,
                    [r.prompt for r in batch],
                    max_new_tokens=self.config.max_new_tokens,
                    temperature=self.config.temperature,
                    seed=self.config.seed * 1_000_003 + self._seq,
                )
            except Exception as exc:  # a model failure fails this batch, never the actor
                self._fail(batch, exc)
                self._schedule()
                return
            self._running = _Batch(decoding, batch)
            if self._first_batch_at is None:
                self._first_batch_at = time.perf_counter()
            self._batches += 1
            occupancy = len(batch) / self.config.max_batch
            self._occupancy_sum += occupancy
            self._m_occupancy.record(occupancy)
        elif self.config.continuous and self._pending:
            await self._join(self._running)
        running = self._running
        try:
            made = await self._compute(
                self.policy.advance, running.decoding, self.config.chunk_tokens
            )
        except Exception as exc:
            self._running = None
            self._fail(running.unanswered(), exc)
            self._schedule()
            return
        self._tokens += made
        self._m_tokens.inc(made)
        done = running.decoding.done
        if done:
            self._running = None
        if done or self.config.answer_early:
            running.answer_finished()
        self._schedule()

    async def _join(self, running: _Batch) -> None:
        """Answer the running batch's finished rows, then fill their places with waiting
        requests. A failed join fails only the joiners: the running rows carry on."""
        running.answer_finished()
        keep = [i for i in range(running.decoding.size) if i not in running.answered]
        room = self.config.max_batch - len(keep)
        if room <= 0:
            return
        joining = [self._pending.popleft()[1] for _ in range(min(room, len(self._pending)))]
        self._seq += 1
        policy = self.policy
        assert isinstance(policy, JoiningPolicy)  # checked at construction
        try:
            decoding = await self._compute(
                policy.join,
                running.decoding,
                keep,
                [r.prompt for r in joining],
                seed=self.config.seed * 1_000_003 + self._seq,
            )
        except Exception as exc:
            self._fail(joining, exc)
            return
        self._running = _Batch(decoding, [running.requests[i] for i in keep] + joining)
        self._joined += len(joining)
        self._m_joins.inc(len(joining))
        self._m_occupancy.record((len(keep) + len(joining)) / self.config.max_batch)

    @handler
    def get_statistics(self, msg: GetGeneratorStatistics) -> GeneratorStatistics:
        return GeneratorStatistics(
            version=self.policy.version,
            requests=self._requests,
            rejected=self._rejected,
            batches=self._batches,
            tokens=self._tokens,
            compute_s=self._compute_s,
            mean_occupancy=self._occupancy_sum / self._batches if self._batches else 0.0,
            switches_mid_batch=self._mid_batch,
            joins=self._joined,
        )

    # -- plumbing --------------------------------------------------------------------------------

    def _check(self, msg: GenerateRequest) -> str | None:
        if not isinstance(msg.reply, _Reply):
            return "GenerateRequest.reply must come from GeneratorClient"
        model = getattr(self.policy, "config", None)
        vocab = getattr(model, "vocab_size", None)
        max_len = getattr(model, "max_len", None)
        if not msg.prompt:
            return "empty prompt"
        if vocab is not None and not all(0 <= t < vocab for t in msg.prompt):
            return f"prompt has token ids outside 0..{vocab - 1}"
        # Checked here, per request: in the batch, the model's own check fails every request.
        new = self.config.max_new_tokens
        if max_len is not None and len(msg.prompt) + new > max_len:
            return (
                f"prompt of {len(msg.prompt)} tokens plus {new} new tokens exceeds the "
                f"model's max_len {max_len}"
            )
        return None

    def _schedule(self) -> None:
        """Arrange the next `_Step`: at once mid-batch or with a full queue, else at max wait."""
        if self._scheduled or (self._running is None and not self._pending):
            return
        self._scheduled = True
        delay = 0.0
        if self._running is None and len(self._pending) < self.config.max_batch:
            waited = clock_now() - self._pending[0][0]
            delay = max(0.0, self.config.max_wait_s - waited)
        # A timer, not try_tell: a full mailbox must not lose (or deadlock on) our own step.
        try:
            self.system.send_after(self.ref, _Step(), delay)
        except RuntimeError:  # the system is stopping: no timers; a direct try is all we have
            if not self.ref.try_tell(_Step()):
                self._scheduled = False

    def _fail(self, batch: list[GenerateRequest], exc: Exception) -> None:
        self.log.error("generation_failed", batch=len(batch), exc_info=exc)
        for request in batch:
            request.reply.error = f"{type(exc).__name__}: {exc}"
            request.reply.event.set()

    async def _compute(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        def call() -> T:
            with self._lock:
                use_threads(self.config.threads)
                return fn(*args, **kwargs)

        started = time.perf_counter()
        with anyio.fail_after(self.config.compute_timeout_s):
            result = await anyio.to_thread.run_sync(call, abandon_on_cancel=True)
        elapsed = time.perf_counter() - started
        self._compute_s += elapsed
        self._m_compute.record(elapsed)
        return result


class GeneratorClient:
    """Asks the generator for one completion, with a deadline."""

    def __init__(self, generator: ActorRef, *, timeout_s: float = 300.0) -> None:
        self.generator = generator
        self.timeout_s = timeout_s

    async def generate(self, prompt: list[int]) -> Sample:
        """:raises GenerationError: refused, failed, or no answer within `timeout_s`."""
        reply = _Reply()
        try:
            with anyio.fail_after(self.timeout_s):
                await self.generator.tell(GenerateRequest(prompt=list(prompt), reply=reply))
                await reply.event.wait()
        except TimeoutError:
            raise GenerationError(f"no completion within {self.timeout_s} s") from None
        if reply.error is not None:
            raise GenerationError(reply.error)
        assert reply.sample is not None
        return reply.sample


@dataclasses.dataclass(frozen=True, slots=True)
class Turn:
    """One model turn of an episode: the prompt it saw and what it sampled."""

    prompt: list[int]
    sample: Sample
    text: str


class ModelActionSource:
    """An `ActionSource` backed by the generator: prompt -> completion -> sandbox action.

    `prompt_for(request, step, last)` writes the turn's prompt; `action_for(request, text)`
    turns the completion into an `Action` (raise `ValueError` for a malformed completion: the
    episode then ends as a worker error, with the reason). Turns are kept per rollout until the
    caller collects them with `pop`. With a `book`, the rollout is registered for staleness
    when it asks for its first tokens.
    """

    def __init__(
        self,
        client: GeneratorClient,
        prompt_for: Callable[[RolloutRequest, int, ExecResult | None], str],
        action_for: Callable[[RolloutRequest, str], Action],
        *,
        book: StalenessBook | None = None,
        tokenizer: ByteTokenizer | None = None,
    ) -> None:
        self.client = client
        self.prompt_for = prompt_for
        self.action_for = action_for
        self.book = book
        self.tokenizer = tokenizer or ByteTokenizer()
        self._turns: dict[str, list[Turn]] = {}

    async def act(self, request: RolloutRequest, step: int, last: ExecResult | None) -> Action:
        if step == 0:  # a retried attempt starts over
            self._turns[request.rollout_id] = []
            if self.book is not None:
                self.book.began(request.rollout_id)
        prompt = self.tokenizer.encode(self.prompt_for(request, step, last))
        sample = await self.client.generate(prompt)
        text = self.tokenizer.decode(sample.tokens)
        self._turns.setdefault(request.rollout_id, []).append(Turn(prompt, sample, text))
        return self.action_for(request, text)

    def pop(self, rollout_id: str) -> list[Turn]:
        """The turns of a finished rollout (empty if it never reached the model)."""
        return self._turns.pop(rollout_id, [])
