"""The live view renders every figure the issue names, from a running system."""

from __future__ import annotations

import pytest
from rich.console import Console

from roost.train.collector import RunCounts
from roost.train.config import TrainConfig
from roost.train.view import Dashboard
from runtime import ActorSystem
from sandboxes.pool import SandboxPool

pytestmark = pytest.mark.anyio


async def test_dashboard_shows_rates_pool_mailboxes_lag_and_eta() -> None:
    counts = RunCounts(requested=10, scored=6, failed=1, cancelled=1)
    counts.recent_pass.extend([1.0, 0.0, 0.0, 1.0])
    counts.recent_reward.extend([1.0, 0.0, 0.5, 1.0])
    console = Console(record=True, width=160)
    board = Dashboard(TrainConfig(), counts, live=False, console=console)
    board.phase = "sft"
    board.phase_budget = 100.0
    board.sft_progress(9, 0.75)
    pool = SandboxPool(lambda key: None, capacity=4)  # type: ignore[arg-type,return-value]
    async with ActorSystem() as system:
        figures = board.figures(system, pool)
    assert figures["scored"] == 6
    assert figures["pass_rate"] == 0.5
    assert figures["reward"] == pytest.approx(0.625)
    assert figures["pool"] == "0/0/4"
    assert figures["eta_s"] is not None
    assert 0 < figures["eta_s"] <= 100
    console.print(board.table(figures))
    text = console.export_text()
    for label in (
        "phase",
        "sft (ETA",
        "step 10",
        "rollouts",
        "pass rate",
        "staleness",
        "pool busy/total/capacity",
        "mailboxes",
        "scheduler=0",
        "loop lag p99",
    ):
        assert label in text, label


def test_sft_eta_follows_the_step_budget_when_it_ends_the_phase_first() -> None:
    import time

    board = Dashboard(TrainConfig(), RunCounts(), live=False, console=Console())
    board.phase = "sft"
    board.phase_started = time.perf_counter() - 10.0
    board.phase_budget = 100.0  # 90 s left by the clock
    board.phase_steps = 20
    board.sft_progress(9, 0.5)  # 10 of 20 steps in 10 s: about 10 s left by the steps
    eta = board.eta()
    assert eta is not None
    assert 9.0 <= eta <= 11.0
    board.phase_steps = None  # a time budget alone (the control)
    eta = board.eta()
    assert eta is not None
    assert 89.0 <= eta <= 90.0
