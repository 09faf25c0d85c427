"""The generator actor: batching, version tags across a weight switch, bad input."""

from __future__ import annotations

import threading
from collections.abc import Sequence

import anyio
import anyio.to_thread
import pytest
import torch

from actors.generator import (
    GenerateRequest,
    GenerationError,
    Generator,
    GeneratorClient,
    GeneratorConfig,
    GetGeneratorStatistics,
    WeightsPublished,
    _Reply,
)
from policies.neural import Sample, generate
from runtime import ActorSystem
from tests.learning._tiny import REAL, Decoding, GatedPolicy, prompts, tiny_policy

pytestmark = [pytest.mark.anyio, pytest.mark.parametrize("anyio_backend", [REAL])]


async def test_tokens_keep_the_version_that_sampled_them_across_a_switch() -> None:
    policy = GatedPolicy(seed=0)
    new_weights = tiny_policy(seed=1).state_dict()
    config = GeneratorConfig(max_batch=2, max_wait_s=0.0, max_new_tokens=12, chunk_tokens=3)
    async with ActorSystem(lag_interval=None) as system:
        gen = system.spawn(lambda: Generator(policy, config), name="generator")
        client = GeneratorClient(gen, timeout_s=30)
        results = []

        async def ask() -> None:
            results.append(await client.generate([257, 120, 61]))

        async with anyio.create_task_group() as group:
            group.start_soon(ask)
            assert await anyio.to_thread.run_sync(policy.entered.wait, 30)  # first chunk is running
            await gen.tell(WeightsPublished(version=1, state=new_weights))
            policy.release.set()
        stats = await gen.ask(GetGeneratorStatistics(), timeout=10)
    (sample,) = results
    # the first token (prompt pass) and the held chunk of 3 were sampled by version 0
    assert sample.versions[:4] == [0, 0, 0, 0]
    assert set(sample.versions[4:]) <= {1}
    assert len(sample.versions) == len(sample.tokens) == len(sample.logprobs)
    assert stats.switches_mid_batch == 1
    assert stats.version == 1


async def test_behaviour_logprobs_match_the_model_that_sampled() -> None:
    policy = tiny_policy()
    config = GeneratorConfig(max_batch=8, max_wait_s=0.0, max_new_tokens=6)
    async with ActorSystem(lag_interval=None) as system:
        gen = system.spawn(lambda: Generator(policy, config), name="generator")
        sample = await GeneratorClient(gen, timeout_s=30).generate([257, 97, 61])
    logp, mask = policy.token_logprobs([[257, 97, 61]], [sample.tokens])
    n = int(mask.sum())
    assert logp[0, :n].tolist() == pytest.approx(sample.logprobs, abs=1e-4)


async def test_many_episodes_are_batched_and_all_answered() -> None:
    policy = tiny_policy()
    config = GeneratorConfig(max_batch=16, max_wait_s=0.001, max_new_tokens=4)
    async with ActorSystem(lag_interval=None) as system:
        gen = system.spawn(lambda: Generator(policy, config), name="generator", mailbox_size=512)
        client = GeneratorClient(gen, timeout_s=60)
        answers = []

        async def episode(p: list[int]) -> None:
            answers.append(await client.generate(p))

        async with anyio.create_task_group() as group:
            for p in prompts(100):
                group.start_soon(episode, p)
        stats = await gen.ask(GetGeneratorStatistics(), timeout=10)
    assert len(answers) == 100
    assert stats.batches >= 100 // 16 + 1
    assert stats.requests == 100


async def test_bad_prompts_get_a_clear_error_and_the_generator_carries_on() -> None:
    policy = tiny_policy()
    async with ActorSystem(lag_interval=None) as system:
        gen = system.spawn(lambda: Generator(policy, GeneratorConfig()), name="generator")
        client = GeneratorClient(gen, timeout_s=30)
        with pytest.raises(GenerationError, match="empty prompt"):
            await client.generate([])
        with pytest.raises(GenerationError, match="outside"):
            await client.generate([257, 100_000])
        ok = await client.generate([257, 97])
    assert ok.tokens


async def test_bad_weights_are_refused_without_losing_the_generator() -> None:
    policy = tiny_policy()
    async with ActorSystem(lag_interval=None) as system:
        gen = system.spawn(lambda: Generator(policy, GeneratorConfig()), name="generator")
        served = await gen.ask(WeightsPublished(version=1, state="not weights"), timeout=10)
        assert served == 0
        wrong_shape = {"tok.weight": torch.zeros(3, 3)}
        served = await gen.ask(WeightsPublished(version=2, state=wrong_shape), timeout=10)
        assert served == 0
        sample = await GeneratorClient(gen, timeout_s=30).generate([257, 97])
    assert set(sample.versions) == {0}


class _ScriptedDecoding:
    """Row i makes one token per step until it has `lengths[i]`."""

    def __init__(self, lengths: list[int]) -> None:
        self.lengths = lengths
        self.made = [1] * len(lengths)  # the prompt pass samples the first token

    @property
    def done(self) -> bool:
        return len(self.ended()) == self.size

    @property
    def size(self) -> int:
        return len(self.lengths)

    def ended(self) -> list[int]:
        return [i for i, (m, n) in enumerate(zip(self.made, self.lengths, strict=True)) if m >= n]

    def samples(self, rows: Sequence[int] | None = None) -> list[Sample]:
        picked = range(self.size) if rows is None else rows
        return [
            Sample([97] * self.made[i], [-0.1] * self.made[i], [0] * self.made[i]) for i in picked
        ]


class _ScriptedPolicy:
    """A prompt's first token says how many tokens its completion has; the second `advance`
    call waits for the test's gate."""

    version = 0

    def __init__(self) -> None:
        self.calls = 0
        self.second_entered = threading.Event()
        self.release = threading.Event()

    def start(self, prompts: Sequence[Sequence[int]], **_: object) -> _ScriptedDecoding:
        return _ScriptedDecoding([p[0] for p in prompts])

    def advance(self, decoding: _ScriptedDecoding, steps: int) -> int:
        self.calls += 1
        if self.calls == 2:
            self.second_entered.set()
            self.release.wait(timeout=30)
        before = sum(decoding.made)
        decoding.made = [
            min(n, m + steps) for m, n in zip(decoding.made, decoding.lengths, strict=True)
        ]
        return sum(decoding.made) - before


async def test_a_finished_sequence_is_answered_before_its_batch_ends() -> None:
    policy = _ScriptedPolicy()
    config = GeneratorConfig(max_batch=2, max_wait_s=1.0, max_new_tokens=32, chunk_tokens=4)
    short_done, long_done = anyio.Event(), anyio.Event()
    answers: dict[str, Sample] = {}
    async with ActorSystem(lag_interval=None) as system:
        gen = system.spawn(lambda: Generator(policy, config), name="generator")  # type: ignore[arg-type]
        client = GeneratorClient(gen, timeout_s=30)

        async def ask(name: str, prompt: list[int], done: anyio.Event) -> None:
            answers[name] = await client.generate(prompt)
            done.set()

        async with anyio.create_task_group() as group:
            group.start_soon(ask, "short", [3, 97], short_done)
            group.start_soon(ask, "long", [20, 97], long_done)
            with anyio.fail_after(10):
                await short_done.wait()
            # The long sequence's second chunk is still held: the batch has not ended.
            assert await anyio.to_thread.run_sync(policy.second_entered.wait, 10)
            assert not long_done.is_set()
            policy.release.set()
    assert len(answers["short"].tokens) == 3
    assert len(answers["long"].tokens) == 20


async def test_continuous_batching_joins_a_waiting_request_to_the_running_batch() -> None:
    policy = GatedPolicy(seed=0)
    config = GeneratorConfig(
        max_batch=4, max_wait_s=0.0, max_new_tokens=40, temperature=0, continuous=True
    )
    first, second = [257, 120, 61], [257, 99, 100, 101, 61]
    async with ActorSystem(lag_interval=None) as system:
        gen = system.spawn(lambda: Generator(policy, config), name="generator")
        client = GeneratorClient(gen, timeout_s=30)
        answers: dict[str, Sample] = {}

        async def ask(name: str, prompt: list[int]) -> None:
            answers[name] = await client.generate(prompt)

        async with anyio.create_task_group() as group:
            group.start_soon(ask, "first", first)
            assert await anyio.to_thread.run_sync(policy.entered.wait, 30)  # its first chunk runs
            # The second request is in the mailbox once `tell` returns; the batch is held.
            reply = _Reply()
            await gen.tell(GenerateRequest(prompt=second, reply=reply))
            policy.release.set()
            with anyio.fail_after(30):
                await reply.event.wait()
            assert reply.sample is not None
            answers["second"] = reply.sample
        stats = await gen.ask(GetGeneratorStatistics(), timeout=10)
    # One batch: the second request joined it instead of waiting for it to end.
    assert (stats.batches, stats.joins) == (1, 1)
    for name, prompt in (("first", first), ("second", second)):
        alone = generate(tiny_policy(seed=0), [prompt], max_new_tokens=40, temperature=0)[0]
        assert answers[name].tokens == alone.tokens
        assert answers[name].logprobs == pytest.approx(alone.logprobs, abs=1e-5)


async def test_continuous_batching_needs_a_policy_that_can_join() -> None:
    with pytest.raises(TypeError, match="continuous batching needs a policy with `join`"):
        Generator(_ScriptedPolicy(), GeneratorConfig(continuous=True))  # type: ignore[arg-type]


class _JoinFails(GatedPolicy):
    def join(self, *args: object, **kwargs: object) -> Decoding:
        raise RuntimeError("no room in the cache")


async def test_a_failed_join_fails_only_the_joiner_and_the_batch_carries_on() -> None:
    policy = _JoinFails(seed=0)
    config = GeneratorConfig(
        max_batch=4, max_wait_s=0.0, max_new_tokens=40, temperature=0, continuous=True
    )
    first, joiner = [257, 120, 61], [257, 99, 61]
    async with ActorSystem(lag_interval=None) as system:
        gen = system.spawn(lambda: Generator(policy, config), name="generator")
        client = GeneratorClient(gen, timeout_s=30)
        answers: list[Sample] = []

        async def ask() -> None:
            answers.append(await client.generate(first))

        async with anyio.create_task_group() as group:
            group.start_soon(ask)
            assert await anyio.to_thread.run_sync(policy.entered.wait, 30)
            reply = _Reply()
            await gen.tell(GenerateRequest(prompt=joiner, reply=reply))
            policy.release.set()
            with anyio.fail_after(30):
                await reply.event.wait()
        stats = await gen.ask(GetGeneratorStatistics(), timeout=10)
    assert reply.error == "RuntimeError: no room in the cache"
    assert stats.joins == 0
    alone = generate(tiny_policy(seed=0), [first], max_new_tokens=40, temperature=0)[0]
    assert [a.tokens for a in answers] == [alone.tokens]


async def test_a_prompt_too_long_for_the_model_fails_alone_not_its_batch() -> None:
    # Before, `_check` let it through, it shared a batch with valid requests, and the model's
    # length check in `start` failed the whole batch.
    policy = tiny_policy()  # max_len 64
    config = GeneratorConfig(max_batch=2, max_wait_s=0.0, max_new_tokens=8)
    too_long, short = [257] * 60, [257, 97, 61]
    async with ActorSystem(lag_interval=None) as system:
        gen = system.spawn(lambda: Generator(policy, config), name="generator")
        # All three are queued before the generator runs: its first batch takes the first two
        # it accepted.
        replies = [_Reply() for _ in range(3)]
        for prompt, reply in zip([too_long, short, short], replies, strict=True):
            assert gen.try_tell(GenerateRequest(prompt=prompt, reply=reply))
        with anyio.fail_after(30):
            for reply in replies:
                await reply.event.wait()
        stats = await gen.ask(GetGeneratorStatistics(), timeout=10)
    assert replies[0].error == (
        "prompt of 60 tokens plus 8 new tokens exceeds the model's max_len 64"
    )
    assert [r.error for r in replies[1:]] == [None, None]
    assert all(r.sample is not None and r.sample.tokens for r in replies[1:])
    assert (stats.rejected, stats.batches) == (1, 1)
