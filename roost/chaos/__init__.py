"""Chaos mode: inject faults into a run at seeded rates and prove that nothing is lost.

`ChaosSpec` is parsed from `--chaos "kill_sandbox=0.02,hung_exec=0.01,crash.worker=0.005"`;
`ChaosSandbox` and `ChaosActions` wrap a sandbox and an action source, and
`runtime.faults.CrashInjector` crashes actors. Every injection is counted in `ChaosCounts`.
"""

from roost.chaos.spec import ChaosSpec, ChaosSpecError, parse_chaos
from roost.chaos.wrappers import ChaosActions, ChaosCounts, ChaosSandbox, InjectedFault

__all__ = [
    "ChaosActions",
    "ChaosCounts",
    "ChaosSandbox",
    "ChaosSpec",
    "ChaosSpecError",
    "InjectedFault",
    "parse_chaos",
]
