"""A `Profile` as a terminal table, as PNG plots, and as an HTML page (or a section of one)."""

from __future__ import annotations

import html
from pathlib import Path

import msgspec
from rich.console import Console
from rich.table import Table

from roost.figures import save_figure
from roost.profile.analyze import Profile
from roost.profile.model import PHASES

__all__ = ["html_section", "print_profile", "write_profile"]

PLOTS = ("profile_phases.png", "profile_stacked.png", "profile_actors.png")


def print_profile(profile: Profile, console: Console) -> None:
    table = Table(title=f"where rollout time went ({profile.rollouts:,} rollouts)")
    for column in ("phase", "p50", "p90", "p99", "mean", "share"):
        table.add_column(column, justify="left" if column == "phase" else "right")
    for phase in PHASES:
        f = profile.phases[phase]
        table.add_row(
            phase,
            _ms(f["p50"]),
            _ms(f["p90"]),
            _ms(f["p99"]),
            _ms(f["mean"]),
            f"{f['share']:.1%}",
        )
    console.print(table)
    if profile.actors:
        actors = Table(title="actors (busy fraction is estimated from sampled handler times)")
        for column in ("actor", "mean busy", "max busy", "mean mailbox", "max mailbox"):
            actors.add_column(column, justify="left" if column == "actor" else "right")
        for group, entry in sorted(profile.actors.items()):
            busy, depth = entry["busy"], entry["depth"]
            actors.add_row(
                group,
                f"{_mean(busy):.0%}" if busy else "n/a",
                f"{max(busy):.0%}" if busy else "n/a",
                f"{_mean(depth):.1f}",
                f"{max(depth, default=0.0):.0f}",
            )
        console.print(actors)
    critical = profile.critical_path
    if critical is not None:
        waits = ", ".join(
            f"{phase} {share:.0%}" for phase, share in critical["wait_by_phase"].items() if share
        )
        console.print(
            f"learner step ({critical['steps']} steps, mean {critical['mean_step_s']:.2f} s): "
            f"compute {critical['compute_share']:.0%}, waiting {critical['wait_share']:.0%}"
            + (f" (the wait: {waits})" if waits else "")
        )
    console.print(f"[bold]bottleneck:[/bold] {profile.bottleneck}")


def write_profile(profile: Profile, directory: str | Path) -> list[Path]:
    """profile.json, the PNGs and profile.html into `directory`; returns the paths written."""
    out = Path(directory)
    out.mkdir(parents=True, exist_ok=True)
    written = [out / "profile.json"]
    written[0].write_bytes(msgspec.json.format(msgspec.json.encode(profile)))
    written += _plots(profile, out)
    page = out / "profile.html"
    page.write_text(
        "<!doctype html><html><head><meta charset='utf-8'><title>roost profile</title>"
        "<style>body{font-family:sans-serif;max-width:1000px;margin:2em auto}"
        "td,th{padding:2px 10px;text-align:right}</style></head><body>"
        + html_section(profile, "")
        + "</body></html>"
    )
    written.append(page)
    return written


def html_section(profile: Profile, image_prefix: str) -> str:
    """The profile as an HTML fragment; images are referenced as `image_prefix + name`."""
    rows = "".join(
        f"<tr><th>{phase}</th>"
        + "".join(f"<td>{_ms(profile.phases[phase][k])}</td>" for k in ("p50", "p90", "p99"))
        + f"<td>{profile.phases[phase]['share']:.1%}</td></tr>"
        for phase in PHASES
    )
    images = "".join(
        f"<p><img src='{html.escape(image_prefix + name)}' alt='{name}'></p>" for name in PLOTS
    )
    return (
        "<h2>Profile</h2>"
        f"<p><b>Bottleneck:</b> {html.escape(profile.bottleneck)}</p>"
        "<table><tr><th>phase</th><th>p50</th><th>p90</th><th>p99</th><th>share</th></tr>"
        f"{rows}</table>{images}"
    )


def _plots(profile: Profile, out: Path) -> list[Path]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    written = []
    fig, ax = plt.subplots(figsize=(7, 4))
    xs = range(len(PHASES))
    for offset, key in ((-0.25, "p50"), (0.0, "p90"), (0.25, "p99")):
        ax.bar([x + offset for x in xs], [profile.phases[p][key] for p in PHASES], 0.25, label=key)
    ax.set_xticks(list(xs), list(PHASES), rotation=20)
    ax.set_ylabel("seconds")
    ax.set_title("Rollout phases: percentiles")
    ax.legend()
    written.append(save_figure(fig, out / PLOTS[0]))

    fig, ax = plt.subplots(figsize=(7, 4))
    ax.stackplot(
        profile.stacked_t,
        *[profile.stacked[p] for p in PHASES],
        labels=list(PHASES),
    )
    ax.set_xlabel("time since the first request (s)")
    ax.set_ylabel("mean seconds per rollout")
    ax.set_title("Where rollout time went, over the run")
    ax.legend(loc="upper left", fontsize="small")
    written.append(save_figure(fig, out / PLOTS[1]))

    fig, (busy_ax, depth_ax) = plt.subplots(2, 1, figsize=(7, 6), sharex=True)
    timed = False
    for group, entry in sorted(profile.actors.items()):
        if entry["busy"] and len(entry["busy"]) == len(entry["t"]):
            busy_ax.plot(entry["t"], entry["busy"], label=group)
            timed = True
        depth_ax.plot(entry["t"], entry["depth"], label=group)
    busy_ax.set_ylabel("busy fraction")
    busy_ax.set_ylim(0, 1.05)
    depth_ax.set_ylabel("mailbox depth")
    depth_ax.set_xlabel("run clock (s)")
    busy_ax.set_title("Actors")
    if timed:
        busy_ax.legend(fontsize="small")
    else:
        busy_ax.text(0.5, 0.5, "no handler timings in this run", ha="center", va="center")
    if profile.actors:
        depth_ax.legend(fontsize="small")
    written.append(save_figure(fig, out / PLOTS[2]))
    return written


def _ms(seconds: float) -> str:
    return f"{seconds * 1e3:,.1f} ms" if seconds < 10 else f"{seconds:,.1f} s"


def _mean(values: list[float]) -> float:
    return sum(values) / len(values) if values else 0.0
