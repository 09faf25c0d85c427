"""The live view of a run: a rich table redrawn in place on a terminal, a plain log line per
interval otherwise (a pipe, a CI log). Rollouts/s, pass rate, reward, staleness, pool
occupancy, mailbox depths, loop lag, the phase and its ETA.
"""

from __future__ import annotations

import collections
import math
import time
from typing import TYPE_CHECKING, Any

import anyio
import structlog
from rich.console import Console
from rich.live import Live
from rich.table import Table

from roost.train.collector import RunCounts
from roost.train.config import TrainConfig
from runtime import ActorSystem
from sandboxes.pool import SandboxPool

if TYPE_CHECKING:
    from roost.train.rl import RLPhase

__all__ = ["Dashboard"]

_log = structlog.get_logger("roost.train.view")
RATE_WINDOW_S = 20.0
WATCHED = ("scheduler", "generator", "learner", "collector", "recorder")


class Dashboard:
    """What the run is doing now; `run` redraws it every `view.interval_s` seconds."""

    def __init__(
        self, config: TrainConfig, counts: RunCounts, *, live: bool, console: Console | None = None
    ) -> None:
        self.config = config
        self.counts = counts
        self.live = live
        self.console = console or Console(stderr=True)
        self.phase = "starting"
        self.phase_started = time.perf_counter()
        self.phase_budget: float | None = None
        self.phase_steps: int | None = None  # an SFT phase's step budget, if it has one
        self.rl: RLPhase | None = None
        self.model = ""
        self.started = time.perf_counter()
        self._history: collections.deque[tuple[float, int]] = collections.deque()
        self._live: Live | None = None
        self.sft_step = 0
        self.sft_loss = math.nan

    def sft_progress(self, step: int, loss: float) -> None:
        """Called from the SFT thread: plain assignments, read by the loop."""
        self.sft_step, self.sft_loss = step + 1, loss

    def figures(self, system: ActorSystem, pool: SandboxPool) -> dict[str, Any]:
        now = time.perf_counter()
        # Over the last RATE_WINDOW_S: episodes finish in bursts as generator batches land.
        self._history.append((now, self.counts.scored))
        while len(self._history) > 2 and now - self._history[1][0] >= RATE_WINDOW_S:
            self._history.popleft()
        then, settled = self._history[0]
        rate = (self.counts.scored - settled) / (now - then) if now > then else 0.0
        snap = system.metrics.snapshot()
        stale = snap.get("learner.staleness") or {}
        lag = snap.get("loop_lag_s") or {}
        stats = pool.statistics()
        recent = self.counts.recent_pass
        rewards = self.counts.recent_reward
        return {
            "phase": self.phase,
            "eta_s": self.eta(),
            "sft_step": self.sft_step,
            "sft_loss": _num(self.sft_loss),
            "elapsed_s": now - self.started,
            "version": snap.get("train.version", 0.0),
            "rollouts_per_s": rate,
            "requested": self.counts.requested,
            "scored": self.counts.scored,
            "failed": self.counts.failed,
            "cancelled": self.counts.cancelled,
            "pass_rate": sum(recent) / len(recent) if recent else 0.0,
            "reward": sum(rewards) / len(rewards) if rewards else 0.0,
            "staleness_mean": _num(stale.get("mean")),
            "staleness_max": _num(stale.get("max")),
            "pool": f"{stats.busy}/{stats.total}/{stats.capacity}",
            "mailboxes": {
                name: int(snap.get(f"actor.{name}.mailbox_depth", 0)) for name in WATCHED
            },
            "loop_lag_p99_s": _num(lag.get("p99")),
        }

    def eta(self) -> float | None:
        if self.phase == "rl" and self.rl is not None:
            return max(0.0, self.rl.budget_s - self.rl.elapsed())
        if self.phase_budget is not None and self.phase in ("sft", "control sft"):
            elapsed = time.perf_counter() - self.phase_started
            left = max(0.0, self.phase_budget - elapsed)
            if self.phase_steps is not None and self.sft_step > 0:  # whichever ends it first
                left = min(left, (self.phase_steps - self.sft_step) * elapsed / self.sft_step)
            return max(0.0, left)
        return None

    def table(self, figures: dict[str, Any]) -> Table:
        table = Table(title=f"roost train · {self.config.name} · {self.model}", show_header=False)
        table.add_column("what", style="bold")
        table.add_column("value")
        eta = figures["eta_s"]
        table.add_row(
            "phase", f"{figures['phase']}" + (f" (ETA {eta:.0f} s)" if eta is not None else "")
        )
        if figures["sft_step"]:
            table.add_row("sft", f"step {figures['sft_step']} · loss {figures['sft_loss']:.3f}")
        table.add_row("elapsed", f"{figures['elapsed_s']:.0f} s · version {figures['version']:.0f}")
        table.add_row(
            "rollouts",
            f"{figures['rollouts_per_s']:.1f}/s · requested {figures['requested']} · scored "
            f"{figures['scored']} · failed {figures['failed']} · cancelled {figures['cancelled']}",
        )
        table.add_row(
            "pass rate · reward", f"{figures['pass_rate']:.1%} · {figures['reward']:.3f} (recent)"
        )
        table.add_row(
            "staleness",
            f"mean {figures['staleness_mean']:.2f} · max {figures['staleness_max']:.0f}",
        )
        table.add_row("pool busy/total/capacity", figures["pool"])
        table.add_row("mailboxes", " ".join(f"{k}={v}" for k, v in figures["mailboxes"].items()))
        table.add_row("loop lag p99", f"{figures['loop_lag_p99_s'] * 1000:.1f} ms")
        return table

    async def run(self, system: ActorSystem, pool: SandboxPool) -> None:
        """Redraw until cancelled."""
        interval = self.config.view.interval_s
        if self.live:
            self._live = Live(console=self.console, auto_refresh=False, transient=False)
            self._live.start()
        try:
            while True:
                await anyio.sleep(interval)
                figures = self.figures(system, pool)
                if self._live is not None:
                    self._live.update(self.table(figures), refresh=True)
                else:
                    _log.info("progress", **{k: _round(v) for k, v in figures.items()})
        finally:
            if self._live is not None:
                self._live.stop()
                self._live = None

    def finish(self, summary: dict[str, Any]) -> None:
        """The closing table: held-out pass rates and the counts."""
        table = Table(title="held-out pass rate (greedy / sampled)")
        table.add_column("stage")
        for split in ("all", "demo_levels", "test_only_levels"):
            table.add_column(split)
        for stage in ("after_sft", "after_rl", "sft_only_control"):
            result = summary.get(f"heldout_pass_rate_{stage}")
            if not result:
                continue
            table.add_row(
                stage,
                *(
                    f"{_pct(result[s]['greedy'])} / {_pct(result[s]['sampled'])}"
                    for s in ("all", "demo_levels", "test_only_levels")
                ),
            )
        self.console.print(table)
        self.console.print(
            f"requested {summary['requested']} = scored {summary['scored']} + failed "
            f"{summary['failed']} + cancelled {summary['cancelled']} · versions "
            f"{summary['versions']} · max staleness {summary['max_staleness_seen']} · "
            f"{summary['throughput']['rollouts_per_s']:.2f} rollouts/s · wall "
            f"{summary['wall_seconds']:.0f} s"
        )


def _num(value: Any) -> float:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return 0.0
    return float(value)


def _round(value: Any) -> Any:
    return round(value, 3) if isinstance(value, float) else value


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{value:.0%}"
