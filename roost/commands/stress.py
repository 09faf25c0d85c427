"""`roost stress`: compare scheduling policies on one simulated workload."""

from __future__ import annotations

import sys
from pathlib import Path

import click
from rich.console import Console

#: Actor roles a stress run can restart without losing state: a worker's episode is failed and
#: retried by the scheduler; the scheduler and the collector keep their state in memory only.
CRASHABLE = frozenset({"worker"})
#: One actor and one mailbox per worker: a typo of a few zeros would otherwise spawn millions
#: and run the machine out of memory before the first rollout.
MAX_CONCURRENCY = 100_000


@click.command()
@click.option(
    "--workload",
    "workload_path",
    required=True,
    type=click.Path(dir_okay=False, path_type=Path),
    help="Workload file (TOML); examples in scripts/workloads/.",
)
@click.option(
    "--policies",
    default="fifo,runtime_affinity",
    show_default=True,
    help="Comma-separated scheduling policies, each run on the same workload and seed.",
)
@click.option("--rollouts", type=click.IntRange(min=1), default=1000, show_default=True)
@click.option(
    "--concurrency",
    type=click.IntRange(min=1, max=MAX_CONCURRENCY),
    default=100,
    show_default=True,
    help="Sandbox workers (one actor each) running rollouts at once.",
)
@click.option("--seed", type=int, default=0, show_default=True)
@click.option(
    "--json", "json_out", type=click.Path(dir_okay=False, path_type=Path), help="Write JSON here."
)
@click.option(
    "--plot", "plot_dir", type=click.Path(file_okay=False, path_type=Path), help="PNGs go here."
)
@click.option(
    "--profile",
    "profile_dir",
    type=click.Path(file_okay=False, path_type=Path),
    help="Profile each policy's run into PROFILE/<policy>/ (see `roost profile`).",
)
@click.option(
    "--chaos",
    "chaos_text",
    help="Inject faults, e.g. 'kill_sandbox=0.02,hung_exec=0.01,slow_exec=0.05,"
    "generator_error=0.02,crash.worker=0.01,seed=1' (see docs/reliability.md).",
)
def stress(
    workload_path: Path,
    policies: str,
    rollouts: int,
    concurrency: int,
    seed: int,
    json_out: Path | None,
    plot_dir: Path | None,
    profile_dir: Path | None,
    chaos_text: str | None,
) -> None:
    """Run each policy on a simulated cluster (virtual clock) and compare them."""
    from policies.scheduling import POLICIES
    from roost.stress.report import print_table, to_json, write_plots
    from roost.stress.simulate import simulate
    from roost.stress.workload import WorkloadError, load_workload

    names = [name.strip() for name in policies.split(",") if name.strip()]
    unknown = [name for name in names if name not in POLICIES]
    known = ", ".join(sorted(POLICIES))
    if not names or unknown:
        said = f"unknown policies {unknown}" if unknown else f"no policy named in {policies!r}"
        raise click.BadParameter(f"{said}; known: {known}", param_hint="--policies")
    twice = sorted({name for name in names if names.count(name) > 1})
    if twice:  # one column each, and the second run's profile would overwrite the first's
        raise click.BadParameter(f"{', '.join(twice)} named twice", param_hint="--policies")
    from roost.chaos import ChaosSpecError, parse_chaos

    try:
        chaos = None if chaos_text is None else parse_chaos(chaos_text, crashable=CRASHABLE)
    except ChaosSpecError as exc:
        raise click.BadParameter(str(exc), param_hint="--chaos") from None
    try:
        workload = load_workload(workload_path)
    except WorkloadError as exc:
        raise click.ClickException(str(exc)) from None
    console = Console()
    results = []
    for name in names:
        with console.status(f"simulating {name} ..."):
            results.append(
                simulate(
                    workload,
                    name,
                    rollouts=rollouts,
                    concurrency=concurrency,
                    seed=seed,
                    profile_dir=None if profile_dir is None else profile_dir / name,
                    chaos=chaos,
                )
            )
    title = (
        f"roost stress: {workload.name}, {rollouts:,} rollouts, concurrency {concurrency}, "
        f"seed {seed}"
    )
    print_table(title, results, console)
    for result in results:
        if "chaos" in result:
            console.print(
                f"chaos ({result['policy']}): injected {result['chaos']}; lost "
                f"{len(result['lost'])}, counted twice {len(result['counted_twice'])}, "
                f"leases outstanding {result['leases_outstanding']}"
            )
    header = {
        "workload": workload.name,
        "rollouts": rollouts,
        "concurrency": concurrency,
        "seed": seed,
    }
    if json_out is not None:
        try:
            json_out.parent.mkdir(parents=True, exist_ok=True)
            json_out.write_text(to_json(header, results))
        except OSError as exc:
            raise click.ClickException(f"{json_out}: cannot write ({exc.strerror})") from None
        console.print(f"wrote {json_out}")
    if plot_dir is not None:
        for path in write_plots(results, plot_dir):
            console.print(f"wrote {path}")
    if profile_dir is not None:
        from roost.profile import analyze, load_run, print_profile, write_profile

        for name in names:
            inputs = load_run(profile_dir / name)
            console.rule(f"profile: {name}")
            profile = analyze(inputs.rollouts, inputs.metrics, inputs.steps)
            print_profile(profile, console)
            write_profile(profile, profile_dir / name)
            console.print(f"wrote {profile_dir / name / 'profile.html'}")
    sys.stdout.flush()
