"""`roost bench ...`: benchmark suites, each printing a table or (with --json) one JSON object."""

from __future__ import annotations

import json
import sys
from typing import Any

import click
from rich.console import Console
from rich.markup import escape

from roost.bench._report import print_table


@click.group()
def bench() -> None:
    """Benchmarks: ratios measured side by side in one run (see docs/benchmarks.md)."""


@bench.command("runtime")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object instead of a table.")
@click.option("--quick", is_flag=True, help="A run of seconds, for CI's regression guard.")
@click.option("--repeats", type=click.IntRange(min=1), help="Repetitions of each side.")
def bench_runtime(as_json: bool, quick: bool, repeats: int | None) -> None:
    """Actor pipeline and ask round trips against raw asyncio on uvloop."""
    from roost.bench import runtime as suite

    result = suite.run(quick=quick, repeats=repeats)
    if as_json:
        _print_json(result)
        return
    console = Console()
    ray = result["ray_actor_calls_per_s"]
    print_table(
        f"roost bench runtime ({result['repeats']} repeats, medians, {result['event_loop']})",
        [
            ("actor pipeline", f"{result['actor_pipeline_msgs_per_s']:,.0f} msg/s", ""),
            ("asyncio.Queue pipeline", f"{result['queue_pipeline_msgs_per_s']:,.0f} msg/s", ""),
            ("pipeline_ratio", f"{result['pipeline_ratio']:.2f}", "target >= 1.0"),
            ("actor ask", f"{result['actor_ask_per_s']:,.0f} /s", ""),
            ("asyncio.Future ping-pong", f"{result['future_pingpong_per_s']:,.0f} /s", ""),
            ("ask_ratio", f"{result['ask_ratio']:.2f}", "target >= 0.7"),
            (
                "Ray actor calls (pipelined)",
                "not installed" if ray is None else f"{ray:,.0f} /s",
                escape("pip install 'roost[ray]'") if ray is None else "",
            ),
        ],
        console,
    )


def _print_json(result: dict[str, Any]) -> None:
    json.dump(result, sys.stdout, indent=2)
    sys.stdout.write("\n")
