"""Held-out evaluation: pass rates on tasks never trained on, greedy and sampled.

Each held-out task gets an episode like training's (up to `max_turns`: write, run the tests in
a sandbox, see the failure, revise), once with greedy decoding and `samples` times sampled at
the training temperature. An episode passes when any turn passes; a task's sampled pass rate is
the share of its sampled episodes that passed (pass@1 estimated from `samples` draws: with one
draw per task, sampling noise alone moves a 90-task figure by about 5 points). The result is shaped
``{"all": {"greedy": f, "sampled": f}, "demo_levels": {...}, "test_only_levels": {...}}``;
a split with no tasks has null fractions. The details hold the same figures counting only
first attempts (`first_turn`), so a multi-turn evaluation also reports pass@1 without revision,
and each split's sampling standard error (`sampled_se`): the part of a figure's noise that more
draws would remove.
"""

from __future__ import annotations

import functools
import math
import time
from collections.abc import Callable, Sequence
from typing import Any

import anyio
import anyio.to_thread
import msgspec
import structlog

from policies.neural import NeuralPolicy, Sample, generate, use_threads
from policies.tokenizer import ByteTokenizer
from roost.train.episode import encode_prompt
from roost.train.task_source import first_prompt, revision_prompt
from sandboxes.pool import SandboxPool
from tasks import Task, Verdict, lease_within
from tasks._reuse import reusable, verdict_key
from tasks._verify import TestsVerifier

__all__ = ["HeldoutResult", "evaluate_heldout"]

HeldoutResult = dict[str, dict[str, float | None]]

_log = structlog.get_logger("roost.train.eval")
GENERATE_BATCH = 64
LEASE_TIMEOUT_S = 120.0
COMPUTE_TIMEOUT_S = 600.0


def _generate_on_every_core(
    policy: NeuralPolicy,
    prompts: list[list[int]],
    *,
    max_new_tokens: int,
    temperature: float,
    seed: int,
) -> list[Sample]:
    use_threads(0)  # nothing else computes during an evaluation
    return generate(
        policy, prompts, max_new_tokens=max_new_tokens, temperature=temperature, seed=seed
    )


async def evaluate_heldout(
    policy: NeuralPolicy,
    tasks: Sequence[Task],
    *,
    pool: SandboxPool,
    key: Callable[[Task], str],
    demo_levels: Sequence[int],
    max_turns: int,
    max_new_tokens: int,
    prompt_room: int,
    temperature: float,
    concurrency: int,
    samples: int = 1,
    seed: int = 0,
) -> tuple[HeldoutResult, dict[str, Any]]:
    """The pass rates (see the module docstring), and details (per task, seconds). `key`
    gives each task's pool key (`roost.train.isolation.SandboxRouting.key_for`)."""
    started = time.perf_counter()
    passed: dict[str, list[float]] = {}
    first: dict[str, list[float]] = {}
    n = len(tasks)
    for mode, temp, draws in (("greedy", 0.0, 1), ("sampled", temperature, samples)):
        turns = await _episodes(
            policy,
            list(tasks) * draws,
            pool,
            key,
            max_turns,
            max_new_tokens,
            prompt_room,
            temp,
            concurrency,
            seed,
        )
        passed[mode] = [sum(t is not None for t in turns[i::n]) / draws for i in range(n)]
        first[mode] = [sum(t == 0 for t in turns[i::n]) / draws for i in range(n)]
    details = {
        "tasks": len(tasks),
        "samples": samples,
        "seconds": time.perf_counter() - started,
        "by_level": _by_level(tasks, passed),
        "sampled_se": _sampling_se(tasks, passed["sampled"], samples, demo_levels),
        "first_turn": _by_split(tasks, first, demo_levels),
        "first_turn_by_level": _by_level(tasks, first),
    }
    return _by_split(tasks, passed, demo_levels), details


def _splits(tasks: Sequence[Task], demo_levels: Sequence[int]) -> dict[str, list[bool]]:
    """Which tasks each split of the result holds."""
    demo = set(demo_levels)
    return {
        "all": [True] * len(tasks),
        "demo_levels": [t.level in demo for t in tasks],
        "test_only_levels": [t.level not in demo for t in tasks],
    }


def _by_split(
    tasks: Sequence[Task], passed: dict[str, list[float]], demo_levels: Sequence[int]
) -> HeldoutResult:
    result: HeldoutResult = {}
    for name, member in _splits(tasks, demo_levels).items():
        result[name] = {}
        for mode, rates in passed.items():
            chosen = [rate for rate, inside in zip(rates, member, strict=True) if inside]
            result[name][mode] = sum(chosen) / len(chosen) if chosen else None
    return result


def _sampling_se(
    tasks: Sequence[Task], rates: list[float], draws: int, demo_levels: Sequence[int]
) -> dict[str, float | None]:
    """Each split's sampling standard error: how far another evaluation of the same weights on
    the same tasks would move its sampled figure, about. A task's rate is a mean of `draws`
    passes, of variance p(1 - p) / draws, estimated without bias by r(1 - r) / (draws - 1);
    the split's figure is the mean over its n tasks. None for one draw, or a split without
    tasks."""
    out: dict[str, float | None] = {}
    for name, member in _splits(tasks, demo_levels).items():
        chosen = [r for r, inside in zip(rates, member, strict=True) if inside]
        if draws < 2 or not chosen:
            out[name] = None
            continue
        variance = sum(r * (1 - r) / (draws - 1) for r in chosen)
        out[name] = math.sqrt(variance) / len(chosen)
    return out


def _by_level(tasks: Sequence[Task], passed: dict[str, list[float]]) -> dict[str, dict[str, float]]:
    out: dict[str, dict[str, float]] = {}
    for level in sorted({t.level for t in tasks}):
        idx = [i for i, t in enumerate(tasks) if t.level == level]
        out[str(level)] = {m: sum(v[i] for i in idx) / len(idx) for m, v in passed.items()}
    return out


async def _episodes(
    policy: NeuralPolicy,
    tasks: Sequence[Task],
    pool: SandboxPool,
    key: Callable[[Task], str],
    max_turns: int,
    max_new_tokens: int,
    prompt_room: int,
    temperature: float,
    concurrency: int,
    seed: int,
) -> list[int | None]:
    """For each task, the turn (from 0) whose attempt passed, or None."""
    tokenizer = ByteTokenizer()
    verifier = TestsVerifier()
    limiter = anyio.CapacityLimiter(concurrency)
    passed_at: list[int | None] = [None] * len(tasks)
    prompts = {i: first_prompt(t) for i, t in enumerate(tasks)}
    for turn in range(max_turns):
        open_ids = [i for i in range(len(tasks)) if passed_at[i] is None]
        if not open_ids:
            break
        ids = [encode_prompt(tokenizer, prompts[i], prompt_room) for i in open_ids]
        texts: list[str] = []
        for start in range(0, len(ids), GENERATE_BATCH):
            call = functools.partial(
                _generate_on_every_core,
                policy,
                ids[start : start + GENERATE_BATCH],
                max_new_tokens=max_new_tokens,
                temperature=temperature,
                seed=seed * 7919 + turn * 131 + start,
            )
            # Abandoned at the deadline, not awaited forever: the TimeoutError ends the run,
            # so no one reads the weights after the thread, and its result is never used.
            with anyio.fail_after(COMPUTE_TIMEOUT_S):
                samples = await anyio.to_thread.run_sync(call, abandon_on_cancel=True)
            texts += [tokenizer.decode(s.tokens) for s in samples]
        # A sampled evaluation draws each task several times and the draws often agree: each
        # distinct (task, answer) runs once, and its repeats get its verdict when that depends
        # on the program and the tests alone (tasks/_reuse.py); otherwise they run for
        # themselves.
        text_of = dict(zip(open_ids, texts, strict=True))
        repeats: dict[bytes, list[int]] = {}
        for i in open_ids:
            repeats.setdefault(verdict_key(tasks[i], text_of[i]), []).append(i)
        verdicts: dict[int, Verdict] = {}
        leaders = [members[0] for members in repeats.values()]
        await _judge_all(verifier, tasks, text_of, leaders, pool, key, limiter, verdicts)
        rest: list[int] = []
        for members in repeats.values():
            first = verdicts[members[0]]
            for i in members[1:]:
                if reusable(tasks[i], first):
                    verdicts[i] = msgspec.structs.replace(first, reused=True)
                else:
                    rest.append(i)
        await _judge_all(verifier, tasks, text_of, rest, pool, key, limiter, verdicts)
        for i, text in zip(open_ids, texts, strict=True):
            verdict = verdicts[i]
            if verdict.passed:
                passed_at[i] = turn
            prompts[i] = revision_prompt(tasks[i], text, verdict)
    return passed_at


async def _judge_all(
    verifier: TestsVerifier,
    tasks: Sequence[Task],
    text_of: dict[int, str],
    ids: list[int],
    pool: SandboxPool,
    key: Callable[[Task], str],
    limiter: anyio.CapacityLimiter,
    into: dict[int, Verdict],
) -> None:
    async with anyio.create_task_group() as group:
        for i in ids:
            group.start_soon(_judge, verifier, tasks[i], text_of[i], pool, key, limiter, into, i)


async def _judge(
    verifier: TestsVerifier,
    task: Task,
    text: str,
    pool: SandboxPool,
    key: Callable[[Task], str],
    limiter: anyio.CapacityLimiter,
    into: dict[int, Verdict],
    index: int,
) -> None:
    async with limiter:
        into[index] = await _verify(verifier, task, text, pool, key)


async def _verify(
    verifier: TestsVerifier, task: Task, text: str, pool: SandboxPool, key: Callable[[Task], str]
) -> Verdict:
    lease = await lease_within(pool, key(task), LEASE_TIMEOUT_S)
    healthy = False
    try:
        sandbox = await lease.ready()
        verdict = await verifier.verify(task, text, sandbox)
        healthy = verdict.failure != "infrastructure"
        if verdict.failure in ("infrastructure", "evaluation"):
            _log.warning("heldout_verify_failed", task=task.id, reason=verdict.reason)
        return verdict
    except Exception as exc:  # counted as a failure to pass, never a crash of the run
        _log.warning("heldout_verify_failed", task=task.id, error=str(exc))
        return Verdict.infrastructure(str(exc))
    finally:
        lease.release(healthy=healthy)
