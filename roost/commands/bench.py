"""`roost bench ...`: benchmark suites, each printing a table or (with --json) one JSON object."""

from __future__ import annotations

import json
import sys
from typing import Any

import click
from rich.console import Console
from rich.markup import escape

from roost.bench._report import print_table
from roost.commands.bench_all import bench_all, bench_scale


@click.group()
def bench() -> None:
    """Benchmarks: ratios measured side by side in one run (see docs/benchmarks.md)."""


bench.add_command(bench_scale)
bench.add_command(bench_all)


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


@bench.command("generation")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object instead of a table.")
@click.option("--quick", is_flag=True, help="A run of seconds (a smaller model, shorter outputs).")
@click.option("--repeats", type=click.IntRange(min=1), help="Repetitions of each side.")
def bench_generation(as_json: bool, quick: bool, repeats: int | None) -> None:
    """Generator actor driven by 1,000 episodes against offline batched generation."""
    from roost.bench import generation as suite
    from runtime.logs import configure_logging

    # Episodes cut off when the measured part ends are logged as dead letters: noise here.
    configure_logging(level="error")
    result = suite.run(quick=quick, repeats=repeats)
    if as_json:
        _print_json(result)
        return
    print_table(
        f"roost bench generation ({result['model']}, {result['device']}, "
        f"{result['repeats']} repeats, medians)",
        [
            ("offline batched", f"{result['offline_tokens_per_s']:,.0f} tok/s", ""),
            (
                f"actor, {result['episodes']} episodes",
                f"{result['actor_tokens_per_s']:,.0f} tok/s",
                f"occupancy {result['actor_mean_occupancy']:.2f}",
            ),
            ("actor_vs_offline_ratio", f"{result['actor_vs_offline_ratio']:.2f}", "target >= 0.8"),
            ("loop lag p99 (actor side)", f"{result['loop_lag_p99_s'] * 1e3:.1f} ms", ""),
        ],
        Console(),
    )


@bench.command("async")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object instead of a table.")
@click.option("--quick", is_flag=True, help="A run of seconds (fewer steps, shorter episodes).")
@click.option("--repeats", type=click.IntRange(min=1), help="Pairs of runs (k = 0, k = 4).")
def bench_async(as_json: bool, quick: bool, repeats: int | None) -> None:
    """Trajectories/s with staleness bound k = 4 against synchronous k = 0."""
    from roost.bench import asynchrony as suite
    from runtime.logs import configure_logging

    # Episodes cut off when the measured part ends are logged as dead letters: noise here.
    configure_logging(level="error")
    result = suite.run(quick=quick, repeats=repeats)
    if as_json:
        _print_json(result)
        return
    sync, asyn = result["k0"], result["k4"]
    print_table(
        f"roost bench async ({result['model']}, {result['steps']} steps of "
        f"{result['batch']} samples, {result['workers']} workers)",
        [
            ("k = 0 (synchronous)", f"{sync['trajectories_per_s']:,.1f} traj/s", ""),
            ("k = 4", f"{asyn['trajectories_per_s']:,.1f} traj/s", ""),
            ("async_speedup", f"{result['async_speedup']:.2f}", "target >= 2.5"),
            ("staleness (k = 4)", str(asyn["staleness_histogram"]), f"max {asyn['max_staleness']}"),
            ("dropped past the bound", str(asyn["dropped_stale"] + sync["dropped_stale"]), "0"),
            (
                "learner idle (k = 0 / 4)",
                f"{sync['learner_idle_fraction']:.2f} / {asyn['learner_idle_fraction']:.2f}",
                "",
            ),
        ],
        Console(),
    )


@bench.command("sandbox")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object instead of a table.")
@click.option("--quick", is_flag=True, help="A run of seconds (fewer samples per measure).")
@click.option("--repeats", type=click.IntRange(min=1), help="Rounds of each measure.")
def bench_sandbox(as_json: bool, quick: bool, repeats: int | None) -> None:
    """Warm pool, fast exec and reset per backend against raw subprocess/aiodocker baselines."""
    from roost.bench import sandbox as suite
    from runtime.logs import configure_logging

    configure_logging(level="error")
    result = suite.run(quick=quick, repeats=repeats)
    if as_json:
        _print_json(result)
        return
    for backend, r in result["backends"].items():
        if "unavailable" in r:
            print_table(
                f"roost bench sandbox: {backend}",
                [("unavailable", "", r["unavailable"])],
                Console(),
            )
            continue
        rows = [
            (name, f"{r[key]['p50_s'] * 1e3:.2f} / {r[key]['p95_s'] * 1e3:.2f} ms", "p50 / p95")
            for name, key in suite.TABLE_ROWS
            if key in r
        ]
        rows.append(("execs/s, 8 warm sandboxes", f"{r['execs_per_s_8_sandboxes']:,.0f}", ""))
        rows += [(key, f"{r[key]:.2f}", "") for key in suite.RATIO_KEYS if key in r]
        rows += [(name, "met" if met else "missed", "target") for name, met in r["targets"].items()]
        print_table(f"roost bench sandbox: {backend} ({result['repeats']} rounds)", rows, Console())


def _print_json(result: dict[str, Any]) -> None:
    json.dump(result, sys.stdout, indent=2)
    sys.stdout.write("\n")
