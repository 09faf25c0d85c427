"""`train`: the composition root of `roost train`. Phases, in order, each skipped on resume
when `progress.json` says it is done:

1. SFT warm start on the demonstration levels (`checkpoints/sft.pt`);
2. held-out evaluation after SFT;
3. RL (`roost/train/rl.py`), resumed from the newest learner checkpoint, for what the run's
   time limit leaves it (`roost/train/budget.py`);
4. held-out evaluation after RL;
5. with `control`, an SFT-only control: SFT continued from `sft.pt` for the RL phase's wall
   time, then the same held-out evaluation;
6. `summary.json` and the report.

A stop (Ctrl-C) drains the phase that is running, checkpoints, writes the summary so far and
returns; `--resume` continues from there.
"""

from __future__ import annotations

import collections
import dataclasses
import functools
import json
import random
import statistics
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import anyio
import anyio.to_thread
import msgspec
import structlog

from actors.learner import Checkpoint, CorruptCheckpointError, episode_of, load_checkpoint
from actors.recorder import Flush, Recorder
from policies.sft import encode_pairs
from policies.transformer import TransformerPolicy
from roost.chaos.spec import ChaosSpec
from roost.chaos.wrappers import ChaosCounts, ChaosSandbox
from roost.train.budget import rl_budget_s
from roost.train.collector import RunCounts
from roost.train.config import TasksConfig, TrainConfig, chaos_spec
from roost.train.evaluation import evaluate_heldout
from roost.train.isolation import SandboxRouting
from roost.train.lineage import Lineage, OpenRollout, trace_lineage
from roost.train.phases import (
    SFTStopped,
    describe_machine,
    load_weights,
    make_policy,
    run_sft,
    save_weights,
)
from roost.train.records import EvalRecord, ResumeRecord, StepRecord, TrajectoryRecord
from roost.train.rl import RESTARTS_PER_MINUTE, SURVIVE_CRASHES, RLPhase
from roost.train.rundir import CorruptProgressError, RunDir
from roost.train.summary import average_label, load_run_records, write_summary
from roost.train.task_source import TaskSource, procedural_tasks
from roost.train.view import Dashboard
from runtime import ActorRef, ActorSystem
from runtime.config import dump_config
from runtime.faults import CrashInjector
from sandboxes._errors import SandboxConfigError, SandboxInfraError
from sandboxes._protocol import Sandbox
from sandboxes._spec import SandboxSpec
from sandboxes.factory import create_sandbox
from sandboxes.pool import DockerReaper, SandboxPool
from tasks import TaskFormatError, lease_within

__all__ = ["TrainError", "TrainHooks", "train"]

_log = structlog.get_logger("roost.train")
MiB = 1024 * 1024
PREFLIGHT_TIMEOUT_S = 120.0
WEIGHTS_TIMEOUT_S = 600.0
CONTROL_MAX_STEPS = 1 << 40  # the control stops on its time budget alone
T = TypeVar("T")


@dataclasses.dataclass
class TrainHooks:
    """Ways in for the CLI and the tests: a stop event, and a callback per learner version."""

    stop: anyio.Event = dataclasses.field(default_factory=anyio.Event)
    on_version: Callable[[int], None] | None = None
    dashboard: Dashboard | None = None


async def train(
    config: TrainConfig, run_dir: Path, *, hooks: TrainHooks | None = None
) -> dict[str, Any]:
    """Run (or resume) the experiment in `run_dir`; returns the summary.

    :raises TrainError: the experiment cannot run as configured (checked before training).
    """
    try:
        return await _train(config, run_dir, hooks)
    except BaseExceptionGroup as group:  # task groups wrap what they raise
        matched, _ = group.split(TrainError)
        if matched is None:
            raise
        first: BaseException = matched
        while isinstance(first, BaseExceptionGroup):
            first = first.exceptions[0]
        raise first from None


async def _train(config: TrainConfig, run_dir: Path, hooks: TrainHooks | None) -> dict[str, Any]:
    hooks = hooks or TrainHooks()
    segment_started = time.perf_counter()
    run = RunDir(run_dir)
    # Before the directory exists: a task file or split that cannot be used leaves nothing
    # behind that would make a rerun with the same --out "already hold a run". Building task
    # sets (thousands of procedural tasks) is CPU work: off the loop.
    source = await anyio.to_thread.run_sync(_task_source, config.tasks, run.root)
    run.create()
    if not run.config.exists():
        run.config.write_text(dump_config(config))
    try:
        progress = run.read_progress()
    except CorruptProgressError as exc:
        raise TrainError(f"cannot resume: {exc}") from None
    progress["segment"] = int(progress.get("segment", -1)) + 1
    progress.setdefault("machines", {})[str(progress["segment"])] = describe_machine()
    run.write_progress(progress)
    heldout = source.heldout()
    counts = RunCounts()
    board = hooks.dashboard or Dashboard(config, counts, live=False)
    board.counts = counts
    stop_flag = threading.Event()

    async def relay_stop() -> None:
        await hooks.stop.wait()
        stop_flag.set()
        board.phase = "stopping"

    chaos = chaos_spec(config.chaos) if config.chaos else None
    chaos_counts = ChaosCounts()
    injector = (
        CrashInjector(chaos.crashes, seed=chaos.seed, first_by=chaos.crash_first_by)
        if chaos and chaos.crashes
        else None
    )
    in_rl = {"on": False}  # sandbox faults strike the RL phase, not the held-out evaluations
    system = ActorSystem(
        lag_interval=0.1,
        metrics_path=run.metrics,
        metrics_interval=config.view.metrics_interval_s,
        stop_timeout=30.0,
        fault_injector=injector,
        # Actors resume after a crash (roost/train/rl.py); only a crash loop, not a crash rate
        # that a run can live with, escalates and ends the run.
        max_restarts=RESTARTS_PER_MINUTE,
        within=60.0,
    )
    spec = SandboxSpec(
        backend=config.sandbox.backend,
        runtime=config.sandbox.runtime,
        cpus=config.sandbox.cpus,
        memory=config.sandbox.memory_mb * MiB,
    )

    routing = SandboxRouting(config.sandbox)
    risks = source.risks()

    def make_sandbox(key: str) -> Sandbox:
        sandbox = create_sandbox(routing.spec_for(key, spec))
        if chaos is None or not chaos.exec_fault_rate:
            return sandbox
        return ChaosSandbox(sandbox, chaos, exec_rng, chaos_counts, active=lambda: in_rl["on"])

    exec_rng = random.Random(chaos.seed if chaos else 0)
    docker = bool(routing.backends(risks) & {"docker", "gvisor"})
    pool = SandboxPool(
        make_sandbox,
        capacity=config.sandbox.pool_capacity,
        metrics=system.metrics,
        reaper=DockerReaper() if docker else None,  # containers of a killed run are removed
    )
    policy = make_policy(config.model, seed=config.seed)
    prompt_room = config.model.max_len - config.model.max_new_tokens
    board.model = f"{policy.num_parameters() / 1e6:.2f}M parameters"
    async with pool, system, anyio.create_task_group() as background:
        for key in routing.keys(risks):  # every backend the run's tasks need
            await _preflight(pool, key)
        background.start_soon(relay_stop)
        background.start_soon(board.run, system, pool)
        recorder = system.spawn(
            lambda: Recorder(run.log), name="recorder", mailbox_size=65536, **SURVIVE_CRASHES
        )

        async def evaluate(stage: str, weights: TransformerPolicy, label: str = "") -> None:
            if stage in progress.get("evals", {}) or hooks.stop.is_set():
                return
            board.phase = f"eval {stage}"
            started = time.perf_counter()
            result, details = await evaluate_heldout(
                weights,
                heldout,
                pool=pool,
                key=routing.key_for,
                demo_levels=source.demo_levels,
                max_turns=config.eval.max_turns,
                max_new_tokens=config.model.max_new_tokens,
                prompt_room=prompt_room,
                temperature=config.eval.sampled_temperature,
                samples=config.eval.samples,
                concurrency=config.eval.concurrency,
                seed=config.seed,
            )
            seconds = time.perf_counter() - started
            record = {"result": result, **details, "seconds": seconds}
            record |= {"weights": label} if label else {}
            progress.setdefault("evals", {})[stage] = record
            run.write_progress(progress)
            await recorder.tell(
                EvalRecord(
                    stage=stage,
                    version=weights.version,
                    result={
                        k: {m: v for m, v in r.items() if v is not None} for k, r in result.items()
                    },
                    tasks=len(heldout),
                    seconds=seconds,
                    wall=time.time(),
                )
            )
            _log.info("heldout", stage=stage, result=result)

        # 1. the warm start
        if config.model.init:
            await _off_loop(load_weights, policy, Path(config.model.init), version=0)
        if run.sft_weights.exists():
            await _off_loop(load_weights, policy, run.sft_weights, version=0)
        elif config.sft.enabled:
            board.phase = "sft"
            board.phase_started = time.perf_counter()
            board.phase_budget = config.sft.time_budget_s
            board.phase_steps = config.sft.max_steps
            pairs = await anyio.to_thread.run_sync(source.demos)
            _warn_if_answers_cut(pairs, config.model.max_new_tokens)
            try:
                result = await anyio.to_thread.run_sync(
                    lambda: run_sft(
                        policy,
                        pairs,
                        config.sft,
                        seed=config.seed,
                        time_budget_s=config.sft.time_budget_s,
                        stop=stop_flag,
                        progress=board.sft_progress,
                    )
                )
            except SFTStopped:
                _log.info("stopped_during_sft")
            else:
                policy.version = 0
                await _off_loop(save_weights, policy, run.sft_weights)
                progress["sft"] = {
                    "steps": result.steps,
                    "seconds": result.seconds,
                    "loss_first": result.losses[0],
                    "loss_last": result.losses[-1],
                    "pairs": len(pairs),
                }
                run.write_progress(progress)
        else:
            await _off_loop(save_weights, policy, run.sft_weights)
        if not hooks.stop.is_set():
            # 2. held-out after SFT
            await evaluate("after_sft", policy)
            # 3. RL
            if not progress.get("rl", {}).get("done"):
                in_rl["on"] = True
                try:
                    await _rl_phase(
                        config,
                        run,
                        progress,
                        system,
                        pool,
                        source,
                        recorder,
                        counts,
                        hooks,
                        board,
                        spent_s=float(progress.get("wall_s", 0.0))
                        + time.perf_counter()
                        - segment_started,
                        chaos=chaos,
                        chaos_counts=chaos_counts,
                    )
                finally:
                    in_rl["on"] = False
                    if chaos is not None:
                        _record_chaos(progress, chaos_counts, injector, system)
                        run.write_progress(progress)
            # 4. held-out after RL
            final = await _off_loop(_latest_policy, config, run)
            if final is not None and progress.get("rl", {}).get("done"):
                await evaluate("after_rl", *final)
            # 5. the SFT-only control, for the RL phase's wall time
            if config.control and progress.get("rl", {}).get("done") and not hooks.stop.is_set():
                await _control(config, run, progress, source, stop_flag, board, evaluate)
        await recorder.ask(Flush(), timeout=60)
        board.phase = "summary"
        progress["wall_s"] = float(progress.get("wall_s", 0.0)) + (
            time.perf_counter() - segment_started
        )
        run.write_progress(progress)
        snapshot = system.metrics.snapshot()
        summary = await anyio.to_thread.run_sync(write_summary, run, config, progress, snapshot)
        background.cancel_scope.cancel()
    board.finish(summary)
    return summary


def _warn_if_answers_cut(pairs: list[tuple[str, str]], max_new_tokens: int) -> None:
    """Demonstrations the model could learn but never write: generation stops at
    `model.max_new_tokens` (bytes; the end token takes one more)."""
    lengths = [len(answer.encode()) for _, answer in pairs]
    cut = [length for length in lengths if length >= max_new_tokens]
    if cut:
        _log.warning(
            "demonstrations_longer_than_max_new_tokens",
            count=len(cut),
            longest_bytes=max(cut),
            max_new_tokens=max_new_tokens,
            fix="raise model.max_new_tokens",
        )


class TrainError(RuntimeError):
    """The experiment cannot run as configured (for example, its sandbox backend is unusable)."""


def _task_source(config: TasksConfig, base_dir: Path) -> TaskSource:
    """The run's tasks, with every level's training side checked as well as its held-out set
    (RL's draw of a training task has no bound of its own).

    :raises TrainError: a malformed task file (naming its path and line), too few tasks in
        it, or a level with no function on one side of the split.
    """
    try:
        source = TaskSource(config, base_dir=base_dir)
        if config.source == "procedural":
            generator = procedural_tasks(config)
            for level in source.levels:
                generator.take(level, 1, split="train")
    except TaskFormatError as exc:  # "PATH:LINE: field: what"
        raise TrainError(f"tasks.path: {exc}") from None
    except ValueError as exc:  # names its key within [tasks], or the full key path
        message = str(exc)
        raise TrainError(message if message.startswith("tasks.") else f"tasks.{message}") from None
    return source


async def _preflight(pool: SandboxPool, key: str) -> None:
    """One sandbox started and a trivial command run in it, before minutes of SFT are spent.

    :raises TrainError: the backend cannot start a sandbox or run python3 in it.
    """
    try:
        lease = await lease_within(pool, key, PREFLIGHT_TIMEOUT_S)
    except (SandboxInfraError, SandboxConfigError) as exc:
        raise TrainError(f"sandbox: cannot make a {key!r} sandbox: {exc}") from None
    healthy = False
    try:
        with anyio.fail_after(PREFLIGHT_TIMEOUT_S):
            sandbox = await lease.ready()
            result = await sandbox.exec(["python3", "-c", "pass"], timeout=30)
        if result.infra_error is not None or result.exit_code != 0:
            why = result.infra_error.message if result.infra_error else result.stderr[-300:]
            raise TrainError(f"sandbox: python3 does not run in the sandbox: {why!r}")
        healthy = True
    except (SandboxInfraError, SandboxConfigError, TimeoutError) as exc:
        raise TrainError(f"sandbox: the {key!r} sandbox did not start: {exc}") from None
    finally:
        lease.release(healthy=healthy)


async def _off_loop(fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """Weights in and out (torch.save/load, a few MB) in a worker thread, with a deadline.

    The thread is abandoned when the deadline passes (else a hung disk would hang the run
    with it): the run then ends, so nothing waits for its result or shares what it touches,
    and a file it was writing is replaced atomically or not at all.

    :raises TrainError: the work did not finish within `WEIGHTS_TIMEOUT_S`.
    """
    call = functools.partial(fn, *args, **kwargs)
    with anyio.move_on_after(WEIGHTS_TIMEOUT_S) as scope:
        return await anyio.to_thread.run_sync(call, abandon_on_cancel=True)
    assert scope.cancelled_caught
    name = getattr(fn, "__name__", repr(fn))
    raise TrainError(f"{name} did not finish within {WEIGHTS_TIMEOUT_S:.0f} s (a hung disk?)")


async def _rl_phase(
    config: TrainConfig,
    run: RunDir,
    progress: dict[str, Any],
    system: ActorSystem,
    pool: SandboxPool,
    source: TaskSource,
    recorder: ActorRef,
    counts: RunCounts,
    hooks: TrainHooks,
    board: Dashboard,
    *,
    spent_s: float,
    chaos: ChaosSpec | None,
    chaos_counts: ChaosCounts,
) -> None:
    rl_progress = progress.setdefault("rl", {})
    if "budget_s" not in rl_progress:  # set once: a resumed run finishes the same phase
        eval_s = float(progress.get("evals", {}).get("after_sft", {}).get("seconds", 0.0))
        budget = rl_budget_s(config, spent_s=spent_s, eval_s=eval_s)
        rl_progress["budget_s"] = budget
        run.write_progress(progress)
        if budget < config.rl.time_budget_s:
            (_log.warning if budget <= 0 else _log.info)(
                "rl_budget_shortened",
                budget_s=round(budget, 1),
                time_budget_s=config.rl.time_budget_s,
                time_limit_s=config.time_limit_s,
                spent_s=round(spent_s, 1),
            )
    if float(rl_progress["budget_s"]) <= 0:
        # Out of time before RL began: no episode starts, and there is no "after RL" to score.
        rl_progress.update(done=True, elapsed_s=0.0, version=0)
        run.write_progress(progress)
        return
    resume = await _off_loop(_newest_checkpoint, run.checkpoints)
    gen_policy = make_policy(config.model, seed=config.seed, dtype=config.model.inference_dtype)
    learn_policy = make_policy(config.model, seed=config.seed)
    await _off_loop(load_weights, gen_policy, run.sft_weights, version=0)
    await _off_loop(load_weights, learn_policy, run.sft_weights, version=0)
    if resume is not None:
        gen_policy.load_state_dict(resume.model, resume.version)
    reference = None
    if config.learner.kl_coef > 0:
        reference = make_policy(config.model, seed=config.seed, dtype=config.model.inference_dtype)
        await _off_loop(load_weights, reference, run.sft_weights, version=0)
    await _close_earlier_segments(run, source, recorder, resume, int(progress["segment"]))
    demonstrations: list[tuple[list[int], list[int]]] = []
    if config.learner.demo_coef > 0:
        demonstrations = await _off_loop(lambda: encode_pairs(source.demos()))
        if not demonstrations:
            raise TrainError(
                "learner.demo_coef: rehearsal needs demonstrations, and the task source has "
                f"none at tasks.demo_levels {config.tasks.demo_levels}"
            )
    phase = RLPhase(
        config,
        system=system,
        pool=pool,
        source=source,
        gen_policy=gen_policy,
        learn_policy=learn_policy,
        reference=reference,
        resume=resume,
        recorder=recorder,
        checkpoint_dir=run.checkpoints,
        segment=int(progress["segment"]),
        budget_s=float(rl_progress["budget_s"]),
        elapsed_before_s=float(rl_progress.get("elapsed_s", 0.0)),
        counts=counts,
        stop=hooks.stop,
        on_version=hooks.on_version,
        chaos=chaos,
        chaos_counts=chaos_counts,
        demonstrations=demonstrations,
    )
    board.phase = "rl"
    board.rl = phase
    outcome = await phase.run()
    rl_progress["elapsed_s"] = outcome.elapsed_s
    rl_progress["version"] = outcome.version
    rl_progress["requested"] = int(rl_progress.get("requested", 0)) + outcome.requested
    rl_progress["generator_tokens"] = (
        int(rl_progress.get("generator_tokens", 0)) + outcome.generator_tokens
    )
    segments = rl_progress.setdefault("segments", [])
    segments.append({"learner": outcome.learner, "interrupted": outcome.interrupted})
    rl_progress["done"] = not outcome.interrupted
    run.write_progress(progress)


def _record_chaos(
    progress: dict[str, Any],
    counts: ChaosCounts,
    injector: CrashInjector | None,
    system: ActorSystem,
) -> None:
    """Faults injected so far (every segment), and what the runtime did about them."""
    segments = progress.setdefault("chaos_segments", {})
    stats = system.statistics()
    segments[str(progress["segment"])] = {
        "faults": counts.as_dict(),
        "crashes": dict(injector.crashes) if injector is not None else {},
        "restarts": stats.restarts,
        "redelivered": stats.redelivered,
        "dead_letters": stats.dead_letters,
        # A message that crashed its actor more than `redeliver` times in a row is given up
        # (a poison message): every injected crash is either redelivered or counted here.
        "crashed_dead_letters": system.dead_letters.by_reason().get("crashed", 0),
    }


async def _close_earlier_segments(
    run: RunDir, source: TaskSource, recorder: ActorRef, resume: Checkpoint | None, segment: int
) -> None:
    """Before RL resumes: record what a killed segment trained on but never logged
    (`_trained_before_kill`), close each other rollout an earlier segment left open (it was in
    flight when that process was killed) with a cancelled record, and mark the checkpoint
    version RL resumes from (roost/train/lineage.py)."""
    records, _ = await anyio.to_thread.run_sync(load_run_records, run)
    lineage = trace_lineage(records)
    if lineage.requested is None and not lineage.steps:
        return  # the first RL segment
    recovered, still_open = _trained_before_kill(
        lineage, resume, source.is_demo_level, now=time.time()
    )
    for record in recovered:  # trajectories before their step, as the collector writes them
        await recorder.tell(record)
    for rollout in still_open:
        await recorder.tell(
            TrajectoryRecord(
                rollout_id=rollout.rollout_id,
                task_id=rollout.task_id,
                level=rollout.level,
                demo_level=source.is_demo_level(rollout.level),
                status="cancelled",
                reason="run killed: the rollout was open when the process died",
                wall=time.time(),
            )
        )
    version = resume.version if resume is not None else 0
    open_count = len(still_open)
    resumed = ResumeRecord(segment=segment, version=version, cancelled=open_count, wall=time.time())
    await recorder.tell(resumed)
    await recorder.ask(Flush(), timeout=60)
    lost = sum(step.version > version for step in lineage.steps)
    steps_recovered = sum(isinstance(r, StepRecord) for r in recovered)
    if open_count or lost or recovered:
        _log.warning(
            "resumed_after_kill",
            closed_open_rollouts=open_count,
            steps_lost=lost,
            steps_recovered=steps_recovered,
            trained_recovered=len(recovered) - steps_recovered,
            version=version,
        )


def _trained_before_kill(
    lineage: Lineage,
    resume: Checkpoint | None,
    is_demo_level: Callable[[int], bool],
    *,
    now: float,
) -> tuple[list[TrajectoryRecord | StepRecord], list[OpenRollout]]:
    """The records a kill kept out of the log although the checkpoint resumed from holds their
    step, and the open rollouts left to cancel.

    The learner checkpoints version V in the handler where it steps; the collector logs that
    step's `StepRecord` afterwards, on the notice it is sent. A kill in between leaves
    checkpoint V with no `StepRecord` for V (or for a few versions before it, when the
    collector lagged). The checkpoint's consumed set is the truth: each version up to V
    without a step record gets one, listing the rollouts recorded as consumed by it, and V's
    also lists every scored rollout in the consumed set that no logged step consumed (its
    record, with reward and turns, was written when it was scored). So the versions run 1..V
    once each, and every trained rollout is in exactly one of their records. Which of several
    unlogged versions trained a rollout is not kept anywhere: all go to V. A rollout in the
    consumed set with no record at all (one still in the recorder's mailbox at the kill, or
    any in a log from before 2026-12-08, which wrote scored records at their step) is
    recorded scored and trained at V without its reward and turns, which died with the
    process.
    """
    if resume is None:
        return [], list(lineage.open)
    version = resume.version
    samples = collections.Counter(episode_of(sample_id) for sample_id in resume.consumed)
    trained = [r for r in lineage.open if r.rollout_id in samples]
    still_open = [r for r in lineage.open if r.rollout_id not in samples]
    unstepped = {
        t.rollout_id
        for t in lineage.trajectories
        if t.status == "scored" and t.consumed_version is None and t.rollout_id in samples
    }
    logged = {step.version for step in lineage.steps}
    missing = [v for v in range(1, version + 1) if v not in logged]
    recovered: list[TrajectoryRecord | StepRecord] = [
        TrajectoryRecord(
            rollout_id=r.rollout_id,
            task_id=r.task_id,
            level=r.level,
            demo_level=is_demo_level(r.level),
            status="scored",
            reason=f"run killed: trained at version {version}; its reward and turns were lost",
            consumed_version=version,
            wall=now,
        )
        for r in trained
    ]
    blob = resume.curriculum
    elapsed_s = float(json.loads(blob).get("elapsed_s", 0.0)) if blob else 0.0
    for missed in missing:
        known = [
            t
            for t in lineage.trajectories
            if t.consumed_version == missed or (missed == version and t.rollout_id in unstepped)
        ]
        rollouts = sorted(
            {t.rollout_id for t in known}
            | ({r.rollout_id for r in trained} if missed == version else set())
        )
        recovered.append(
            StepRecord(
                version=missed,
                samples=sum(samples[rollout_id] for rollout_id in rollouts),
                # Of the records the log holds: a rollout without one has no reward to count.
                reward_mean=statistics.fmean(t.reward for t in known) if known else 0.0,
                pass_rate=statistics.fmean(t.passed for t in known) if known else 0.0,
                wall=now,
                elapsed_s=elapsed_s,
                rollout_ids=rollouts,
            )
        )
    return recovered, still_open


def _newest_checkpoint(directory: Path) -> Checkpoint | None:
    """The newest learner checkpoint in `directory` that loads, or None when there is none.

    A corrupt one (a disk fault: saves are atomic) newer than a usable one is set aside as
    `<name>.corrupt`, with a warning naming it, and the usable one is resumed from: the steps
    after it are void, as after a kill. Set aside, since it would otherwise stay the newest
    and outlive the learner's next saves (which prune the oldest).

    :raises TrainError: checkpoints are there and none of them loads (naming each; none is
        moved, so the run directory stays as it was found).
    """
    faults: list[tuple[Path, CorruptCheckpointError]] = []
    for path in sorted(directory.glob("ckpt-*.pt"), reverse=True):
        try:
            ckpt = load_checkpoint(path)
        except CorruptCheckpointError as exc:
            faults.append((path, exc))
            continue
        for bad, fault in faults:
            aside = bad.with_name(bad.name + ".corrupt")
            bad.replace(aside)
            _log.warning(
                "corrupt_checkpoint_skipped",
                path=str(bad),
                moved_to=str(aside),
                error=str(fault),
                resumed_from=str(path),
            )
        return ckpt
    if faults:
        raise TrainError(
            "no usable learner checkpoint to resume from: " + "; ".join(str(e) for _, e in faults)
        )
    return None


def _latest_policy(config: TrainConfig, run: RunDir) -> tuple[TransformerPolicy, str] | None:
    """The weights "after RL" is scored on, and what they are: the learner's moving average
    when the run keeps one and the checkpoint holds it, else the last step's weights."""
    ckpt = _newest_checkpoint(run.checkpoints)
    if ckpt is None:
        return None
    policy = make_policy(config.model, seed=config.seed)
    decay = config.learner.average_decay
    if decay > 0 and ckpt.average is not None:
        policy.load_state_dict(ckpt.average, ckpt.version)
        return policy, average_label(decay)
    policy.load_state_dict(ckpt.model, ckpt.version)
    return policy, "last"


async def _control(
    config: TrainConfig,
    run: RunDir,
    progress: dict[str, Any],
    source: TaskSource,
    stop_flag: threading.Event,
    board: Dashboard,
    evaluate: Callable[[str, TransformerPolicy], Any],
) -> None:
    if "sft_only_control" in progress.get("evals", {}):
        return
    policy = make_policy(config.model, seed=config.seed)
    await _off_loop(load_weights, policy, run.sft_weights, version=0)
    budget = float(progress["rl"]["elapsed_s"])
    board.phase = "control sft"
    board.phase_started = time.perf_counter()
    board.phase_budget = budget
    board.phase_steps = None
    try:
        result = await anyio.to_thread.run_sync(
            lambda: run_sft(
                policy,
                source.demos(),
                # The control's budget is the RL phase's wall time, never the warm start's
                # step count (which would cut it short: tuned down), so its rate decays by time.
                msgspec.structs.replace(config.sft, max_steps=CONTROL_MAX_STEPS),
                seed=config.seed + 1,
                time_budget_s=budget,
                stop=stop_flag,
                progress=board.sft_progress,
            )
        )
    except SFTStopped:
        return
    progress["control"] = {"steps": result.steps, "seconds": result.seconds}
    run.write_progress(progress)
    await evaluate("sft_only_control", policy)
