"""How long the RL phase may run, so that the whole run keeps its time limit.

`time_limit_s` bounds the run's wall time from its start to its summary. Everything before RL
(start-up, the warm start, the evaluation after it) has been spent when the RL phase starts;
what follows it is bounded or measured: the drain (`rl.drain_timeout_s`), the evaluation after
RL (about as long as the one after SFT: the same tasks, the same model), the control with its
own evaluation when there is one (the control trains for RL's wall time), and the summary and
report. RL gets the rest, never more than `rl.time_budget_s`. So a fast machine spends its slack
on RL and a slow one still finishes in time, where a fixed RL budget does neither.
"""

from __future__ import annotations

from roost.train.config import TrainConfig

__all__ = ["EVAL_SLACK", "FINISH_MARGIN_S", "rl_budget_s"]

#: An evaluation after RL against the one after SFT: answers of other lengths, a busier machine.
EVAL_SLACK = 1.5
#: The checkpoint, the summary, the report's plots and the process's exit (about 6 s measured).
FINISH_MARGIN_S = 15.0


def rl_budget_s(config: TrainConfig, *, spent_s: float, eval_s: float) -> float:
    """The RL phase's wall time: `rl.time_budget_s`, shortened to what `time_limit_s` leaves
    after `spent_s` seconds of the run, an evaluation taking `eval_s`; 0 when nothing is left
    (the run then skips RL)."""
    cap = config.rl.time_budget_s
    if not config.time_limit_s:
        return cap
    evaluations_after = 2 if config.control else 1
    left = (
        config.time_limit_s
        - spent_s
        - config.rl.drain_timeout_s
        - evaluations_after * EVAL_SLACK * eval_s
        - FINISH_MARGIN_S
    )
    if config.control:
        left /= 2  # the control trains for as long as RL ran
    return max(0.0, min(cap, left))
