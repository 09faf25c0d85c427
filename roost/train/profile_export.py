"""The run log as `roost profile` reads it: `rollouts.jsonl` and `learner_steps.jsonl`.

Written from `trajectories.log` at the end of a run and by `roost report`, so `roost profile
RUN_DIR` works on every training run. A learner step's wait starts when the previous step
ended (the first: when the first rollout of its segment was requested) and its batch was
ready when the last rollout it consumed finished.

`profile_training_run` is `roost train --profile`: once the report is built, the profile of
the run, as `roost profile RUN_DIR` makes it, printed and added to the report.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rich.console import Console

from roost.profile.model import LearnerStep, RolloutTiming
from roost.profile.sources import LEARNER_STEPS, ROLLOUTS, write_jsonl
from roost.train.lineage import trace_lineage
from roost.train.records import TrajectoryRecord
from roost.train.rundir import RunDir

__all__ = ["PROFILE_DIR", "add_profile_to_report", "export_profile_inputs", "profile_training_run"]

#: Where the profile goes inside a run directory (as `roost profile RUN_DIR` writes it).
PROFILE_DIR = "profile"
_SECTION_START, _SECTION_END = "<!-- roost profile -->", "<!-- /roost profile -->"


def export_profile_inputs(run: RunDir, records: Sequence[Any]) -> None:
    # The surviving history: after a kill and resume, steps lost with the process are void.
    lineage = trace_lineage(records)
    trajectories = lineage.trajectories
    write_jsonl(run.root / ROLLOUTS, [_timing(r) for r in trajectories])
    finished = {r.rollout_id: r.finished_at for r in trajectories}
    steps: list[LearnerStep] = []
    previous: float | None = None
    for step in lineage.steps:
        if step.at <= 0:
            continue  # written before steps carried the loop clock
        ends = [finished[i] for i in step.rollout_ids if i in finished]
        started = (
            previous if previous is not None and previous <= step.at else min(ends, default=step.at)
        )
        ready = min(max([started, *ends]), step.at)
        steps.append(
            LearnerStep(
                version=step.version,
                wait_started_at=min(started, ready),
                batch_ready_at=ready,
                finished_at=step.at,
                rollout_ids=list(step.rollout_ids),
            )
        )
        previous = step.at
    write_jsonl(run.root / LEARNER_STEPS, steps)


def _timing(record: TrajectoryRecord) -> RolloutTiming:
    status = {"scored": "completed"}.get(record.status, record.status)
    return RolloutTiming(
        rollout_id=record.rollout_id,
        status=status,
        requested_at=record.requested_at,
        finished_at=max(record.finished_at, record.requested_at),
        queue_wait_s=max(0.0, record.queue_wait_s),
        acquire_s=max(0.0, record.acquire_s),
        generate_s=max(0.0, record.generate_s),
        exec_s=max(0.0, record.exec_s),
        evaluate_s=max(0.0, record.evaluate_s),
        learner_wait_s=max(0.0, record.learner_wait_s or 0.0),
    )


def profile_training_run(
    run_dir: Path, console: Console | None = None, *, bins: int = 20
) -> list[Path]:
    """Profile a finished training run whose report is built (`build_report` exports the
    timing rows): print the tables, write `RUN_DIR/profile/` (profile.json, profile.html, the
    PNGs) and add the profile's section, with its plots, to `report.html`.

    Returns the paths written; none, with the reason on `console`, when the run left nothing
    to profile (for example, stopped before any rollout finished).
    """
    from roost.profile import ProfileInputError, analyze, load_run, print_profile, write_profile
    from roost.profile.render import html_section

    console = console or Console()
    try:
        inputs = load_run(run_dir)
        profile = analyze(inputs.rollouts, inputs.metrics, inputs.steps, bins=bins)
    except ProfileInputError as exc:
        console.print(f"[yellow]train --profile: nothing to profile: {exc}[/yellow]")
        return []
    print_profile(profile, console)
    written = write_profile(profile, run_dir / PROFILE_DIR)
    report = RunDir(run_dir).report
    add_profile_to_report(report, html_section(profile, f"{PROFILE_DIR}/"))
    return [*written, report]


def add_profile_to_report(report: Path, section: str) -> None:
    """Put `section` at the end of the report's body, in place of any earlier profile section
    (a report profiled twice holds one)."""
    page = report.read_text(encoding="utf-8") if report.exists() else ""
    marked = f"{_SECTION_START}{section}{_SECTION_END}"
    earlier = re.compile(re.escape(_SECTION_START) + ".*?" + re.escape(_SECTION_END), re.DOTALL)
    if earlier.search(page):
        page = earlier.sub(lambda _: marked, page, count=1)
    elif "</body>" in page:
        page = page.replace("</body>", marked + "</body>", 1)
    else:
        page += marked
    report.write_text(page, encoding="utf-8")
