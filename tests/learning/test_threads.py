"""Intra-op threads: the RL phase's generator and learner each compute on their share of the
cores, and whatever a worker thread was set to before, SFT and evaluation use them all."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

import anyio
import anyio.to_thread
import pytest
import torch

from actors._learner_core import LearnerConfig, LearnerCore, Trajectory
from actors.generator import Generator, GeneratorClient, GeneratorConfig
from policies.neural import DEFAULT_THREADS, use_threads
from policies.transformer import TransformerPolicy
from roost.train.evaluation import _generate_on_every_core
from roost.train.rl import rl_threads
from runtime import ActorSystem
from tests.learning._tiny import REAL, TINY

real_threads = pytest.mark.parametrize("anyio_backend", [REAL])

OTHER = DEFAULT_THREADS + 1  # a count that cannot be mistaken for the default


class _Counting(TransformerPolicy):
    """Notes the intra-op thread count of every prompt pass and training pass."""

    def __init__(self) -> None:
        super().__init__(TINY, device="cpu", seed=0)
        self.seen: list[int] = []

    def start(self, prompts: Sequence[Sequence[int]], **kwargs: Any) -> Any:
        self.seen.append(torch.get_num_threads())
        return super().start(prompts, **kwargs)

    def token_logprobs(self, *args: Any, **kwargs: Any) -> tuple[torch.Tensor, torch.Tensor]:
        self.seen.append(torch.get_num_threads())
        return super().token_logprobs(*args, **kwargs)


@pytest.mark.anyio
@real_threads
async def test_use_threads_sets_the_calling_threads_count_and_zero_restores_the_default() -> None:
    def probe(threads: int) -> int:
        use_threads(threads)
        return torch.get_num_threads()

    assert await anyio.to_thread.run_sync(probe, OTHER) == OTHER
    assert await anyio.to_thread.run_sync(probe, 0) == DEFAULT_THREADS


@pytest.mark.anyio
@real_threads
async def test_the_generator_computes_on_its_configured_threads() -> None:
    policy = _Counting()
    config = GeneratorConfig(max_batch=4, max_wait_s=0.0, max_new_tokens=4, threads=OTHER)
    async with ActorSystem(lag_interval=None) as system:
        gen = system.spawn(lambda: Generator(policy, config), name="generator")
        await GeneratorClient(gen, timeout_s=30).generate([257, 120, 61])
    assert policy.seen == [OTHER]


def test_the_learner_steps_on_its_configured_threads() -> None:
    policy = _Counting()
    core = LearnerCore(policy, LearnerConfig(threads=OTHER))
    group = [
        Trajectory(f"g/{i}", [257, 120, 61], [97, 98], [-1.0, -1.0], [0, 0], float(i))
        for i in range(2)
    ]
    thread = threading.Thread(target=core.update, args=([group],))
    thread.start()
    thread.join(60)
    assert not thread.is_alive()
    assert policy.seen == [OTHER]


@pytest.mark.anyio
@real_threads
async def test_evaluation_uses_every_core_in_a_thread_set_to_fewer() -> None:
    policy = _Counting()

    def after_rl_in_a_reused_worker() -> None:
        use_threads(OTHER)  # what an RL phase left in this worker thread
        _generate_on_every_core(policy, [[257, 120]], max_new_tokens=2, temperature=1.0, seed=0)

    await anyio.to_thread.run_sync(after_rl_in_a_reused_worker)
    assert policy.seen == [DEFAULT_THREADS]


def test_rl_threads_halves_the_cores_on_a_cpu_and_keeps_a_configured_count() -> None:
    assert rl_threads(3) == 3
    if not torch.cuda.is_available():
        assert rl_threads(0) == max(1, DEFAULT_THREADS // 2)
