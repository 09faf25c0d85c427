"""`summary.json`: the run's figures, computed from the run log and `progress.json` (so that
`roost report` can rebuild it, and a resumed run counts every segment).

Keys: `heldout_pass_rate_after_sft`, `heldout_pass_rate_after_rl`,
`heldout_pass_rate_sft_only_control` (null without the control), each
``{"all": {"greedy": f, "sampled": f}, "demo_levels": {...}, "test_only_levels": {...}}``;
`requested`, `scored`, `failed`, `cancelled` (requested = scored + failed + cancelled when
`balanced`), `max_staleness_seen`, `throughput`, and more detail below them.
"""

from __future__ import annotations

import collections
from typing import Any

from actors.recorder import read_records
from roost.train.config import TrainConfig
from roost.train.lineage import trace_lineage
from roost.train.records import EvalRecord, RunRecord
from roost.train.rundir import RunDir

__all__ = ["average_label", "load_run_records", "summarize", "write_summary"]


def average_label(decay: float) -> str:
    """How summary.json names the weights' moving average."""
    return f"moving average, decay {decay}"


def load_run_records(run: RunDir) -> tuple[list[Any], list[str]]:
    """Every record of the run log, and problems met reading it (a torn tail, bad records)."""
    records, report, bad = read_records(run.log, RunRecord)
    problems = list(bad)
    if report.torn:
        problems.append(f"torn tail dropped: {report.reason}")
    return records, problems


def summarize(
    run: RunDir, config: TrainConfig, progress: dict[str, Any], metrics: dict[str, Any]
) -> dict[str, Any]:
    records, problems = load_run_records(run)
    lineage = trace_lineage(records)
    trajectories, steps = lineage.trajectories, lineage.steps
    statuses = collections.Counter(r.status for r in trajectories)
    ids = collections.Counter(r.rollout_id for r in trajectories)
    failures = collections.Counter(
        (r.reason.split(":")[0].strip() or r.status) for r in trajectories if r.status != "scored"
    )
    staleness = collections.Counter(
        r.consumed_version - 1 - min((t.min_version for t in r.turns), default=0)
        for r in trajectories
        if r.consumed_version is not None
    )
    rl = progress.get("rl", {})
    learner_max = max(
        (s["learner"].get("max_staleness", 0) for s in rl.get("segments", [])), default=0
    )
    evals = progress.get("evals", {})
    rl_s = float(rl.get("elapsed_s", 0.0))
    scored = statuses.get("scored", 0)
    samples = sum(len(r.turns) for r in trajectories if r.status == "scored")
    solved = sum(bool(t.solved) for r in trajectories if r.status == "scored" for t in r.turns)
    # The log's request records count every segment, a killed one included; progress.json
    # only counts segments that ended (and is all that logs from before them have).
    requested = (
        len(lineage.requested) if lineage.requested is not None else int(rl.get("requested", 0))
    )
    trained = [rid for step in steps for rid in step.rollout_ids]
    return {
        "heldout_pass_rate_after_sft": evals.get("after_sft", {}).get("result"),
        "heldout_pass_rate_after_rl": evals.get("after_rl", {}).get("result"),
        # Which weights "after RL" is: the learner's moving average, or its last step's (as
        # recorded with the evaluation; a run from before that record, from the config).
        "after_rl_weights": evals.get("after_rl", {}).get("weights")
        or (
            average_label(config.learner.average_decay)
            if config.learner.average_decay > 0
            else "last"
        ),
        "heldout_pass_rate_sft_only_control": (
            evals.get("sft_only_control", {}).get("result") if config.control else None
        ),
        "requested": requested,
        "scored": scored,
        "failed": statuses.get("failed", 0),
        "cancelled": statuses.get("cancelled", 0),
        "balanced": (
            requested == len(trajectories)
            and all(n == 1 for n in ids.values())
            and not lineage.open
            and (lineage.requested is None or set(ids) == set(lineage.requested))
        ),
        "trained_twice": len(trained) - len(set(trained)),
        # failed turns that passed another training task's tests, each also trained as that
        # task's first-attempt pass (episode.relabel; 0 when off)
        "hindsight_samples": solved,
        # scored turns judged by an earlier run's verdict on the same program and tests
        # (episode.reuse_verdicts), of `samples` model turns in all
        "reused_verdicts": sum(
            t.reused for r in trajectories if r.status == "scored" for t in r.turns
        ),
        "samples": samples,
        "max_staleness_seen": max(max(staleness, default=0), learner_max),
        "throughput": {
            "rollouts_per_s": scored / rl_s if rl_s else 0.0,
            "samples_per_s": samples / rl_s if rl_s else 0.0,
            "tokens_per_s": int(rl.get("generator_tokens", 0)) / rl_s if rl_s else 0.0,
        },
        "name": config.name,
        "k": config.learner.k,
        "versions": int(rl.get("version", 0)),
        # Optimizer steps (a version makes `learner.minibatches` of them), over every segment.
        "optimizer_steps": sum(
            int(s["learner"].get("optimizer_steps", s["learner"].get("steps", 0)))
            for s in rl.get("segments", [])
        ),
        "learner_steps_logged": len(steps),
        "learner_steps_lost": lineage.void_steps,  # logged, but lost with a killed process
        "trained_in_lost_steps": lineage.trained_in_lost_steps,
        "rl_seconds": rl_s,
        # the RL phase's wall time: rl.time_budget_s, or less where time_limit_s cut it
        "rl_budget_s": rl.get("budget_s"),
        "time_limit_s": config.time_limit_s,
        "sft": progress.get("sft"),
        "control": progress.get("control"),
        "wall_seconds": float(progress.get("wall_s", 0.0)),
        "segments": int(progress.get("segment", 0)) + 1,
        "machines": progress.get("machines", {}),  # per segment: device, CPUs, torch
        "staleness_histogram": {str(k): v for k, v in sorted(staleness.items())},
        "failures_by_kind": dict(failures),
        "heldout_by_level": {stage: e.get("by_level") for stage, e in evals.items()},
        # another evaluation of the same weights on the same tasks moves a sampled figure by
        # about this much (per split; null from before it was recorded, or for one draw)
        "heldout_sampled_se": {stage: e.get("sampled_se") for stage, e in evals.items()},
        # first attempts only: equal to the figures above when eval.max_turns is 1
        "heldout_first_turn": {stage: e.get("first_turn") for stage, e in evals.items()},
        "heldout_tasks": max((e.get("tasks", 0) for e in evals.values()), default=0),
        "scored_not_trained": sum(
            r.status == "scored" and r.consumed_version is None for r in trajectories
        ),
        "train_pass_rate": (
            sum(r.passed for r in trajectories if r.status == "scored") / scored if scored else 0.0
        ),
        "eval_records": sum(isinstance(r, EvalRecord) for r in records),
        "log_problems": problems,
        "loop_lag_p99_s": (metrics.get("loop_lag_s") or {}).get("p99"),
        "chaos": _chaos_totals(progress) if config.chaos else None,
    }


def _chaos_totals(progress: dict[str, Any]) -> dict[str, Any]:
    """Faults injected and crashes survived, summed over the segments of the run."""
    faults: collections.Counter[str] = collections.Counter()
    crashes: collections.Counter[str] = collections.Counter()
    totals = {"restarts": 0, "redelivered": 0, "dead_letters": 0, "crashed_dead_letters": 0}
    for segment in progress.get("chaos_segments", {}).values():
        faults.update(segment["faults"])
        crashes.update(segment["crashes"])
        for key in totals:
            totals[key] += int(segment.get(key, 0))  # absent in runs from older versions
    return {"faults": dict(faults), "crashes": dict(crashes), **totals}


def write_summary(
    run: RunDir, config: TrainConfig, progress: dict[str, Any], metrics: dict[str, Any]
) -> dict[str, Any]:
    summary = summarize(run, config, progress, metrics)
    run.write_json(run.summary, summary)
    return summary
