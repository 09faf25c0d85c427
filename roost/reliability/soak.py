"""The leak soak: many concurrent episodes on warm sandboxes for a given time, with the host's
resources sampled at checkpoints, and a verdict on whether anything grew.

    scripts/soak                        # 10 minutes, sampled each minute, process sandboxes
    scripts/soak --seconds 40 --interval 8 --concurrency 8 --json soak.json
    scripts/soak --backend docker       # containers are counted too

The episodes take the path a training run takes (scheduler → sandbox workers → warm pool) with a
scripted model (`episodes.ScriptedActions`), mixing every way an episode ends: passes on the
second step, failures, exec timeouts, orphaned background processes, capped floods of output,
files written. At each checkpoint the feed pauses, the episodes in flight finish and the pool
settles, then the probe samples: the run is then in the same state every time (an idle warm
pool), so any difference between checkpoints is what the run kept, not what was in flight.

The first checkpoint after the warm-up is the baseline. A resource leaks when it stays above the
baseline by more than its tolerance in each of the last two checkpoints (a transient does not
persist; a leak does): counts (open files, processes, containers, cgroups, mounts) must come back
exactly; memory may grow by `rss_tolerance_mb` (the allocator keeps freed arenas and caches fill
up to a plateau); disk by 1 MiB (the work directories are emptied on every reset).
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import aiodocker
import anyio

from actors.rollouts import RolloutFinished, RolloutRequest
from actors.sandbox_worker import Action
from roost.reliability.episodes import EpisodeDriver, ScriptedActions
from roost.reliability.probes import ResourceProbe, ResourceSample
from sandboxes._spec import BackendName, SandboxSpec
from sandboxes.factory import create_sandbox
from sandboxes.pool import SandboxPool

__all__ = ["SoakConfig", "SoakReport", "SoakStalledError", "run_soak"]

#: The scripted episodes, by kind: the actions of each step (the last repeats).
EPISODES: dict[str, list[Action]] = {
    "pass-second-step": [
        Action(["sh", "-c", "echo draft > a.txt; exit 1"]),
        Action(["python3", "-c", "open('b.txt', 'w').write('x' * 100_000)"]),
    ],
    "fail": [Action(["sh", "-c", "cat no-such-file"])],
    "exec-timeout": [Action(["sleep", "30"], timeout=0.3), Action(["true"])],
    "orphans": [Action(["sh", "-c", "sleep 300 & sleep 300 & exit 1"]), Action(["true"])],
    "output-flood": [Action(["sh", "-c", "head -c 3000000 /dev/zero; exit 1"]), Action(["true"])],
    "files": [
        Action(["sh", "-c", "mkdir -p d/e && head -c 524288 /dev/zero > d/e/f; exit 1"]),
        Action(["sh", "-c", "test -s d/e/f"]),
    ],
}
COUNTS = ("open_files", "processes", "containers", "cgroups", "mounts")


class SoakStalledError(RuntimeError):
    """No episode finished within the stall limit: something hung."""


@dataclasses.dataclass(frozen=True)
class SoakConfig:
    duration_s: float = 600.0
    interval_s: float = 60.0
    concurrency: int = 16
    backend: BackendName = "process"
    #: Checkpoints before the baseline (the pool fills and caches warm up during the first).
    warmup_checkpoints: int = 1
    rss_tolerance_mb: float = 24.0
    disk_tolerance_mb: float = 1.0
    #: Longest wait for any one episode to finish before the soak calls it a hang.
    stall_s: float = 120.0


@dataclasses.dataclass
class SoakReport:
    config: SoakConfig
    samples: list[ResourceSample] = dataclasses.field(default_factory=list)
    outcomes: dict[str, int] = dataclasses.field(default_factory=dict)
    submitted: int = 0
    finished: int = 0

    @property
    def baseline(self) -> ResourceSample | None:
        # samples[0] is taken before anything ran; the warm-up checkpoints follow it.
        index = self.config.warmup_checkpoints + 1
        return self.samples[index] if len(self.samples) > index else None

    def growth(self) -> dict[str, float]:
        """Per resource: how far the last two checkpoints both stay above the baseline."""
        base = self.baseline
        if base is None:
            return {}
        # Two checkpoints after the baseline, never the baseline itself: a tail that held it
        # would take min(baseline, last) and so hide any growth.
        tail = self.samples[self.config.warmup_checkpoints + 2 :][-2:]
        if len(tail) < 2:
            return {}
        grown: dict[str, float] = {}
        for name in (*COUNTS, "rss_mb", "disk_mb"):
            start = getattr(base, name)
            if start is None:
                continue
            grown[name] = min(getattr(s, name) for s in tail) - start
        return grown

    def leaks(self) -> list[str]:
        """Each resource that grew past its tolerance, and any episode lost."""
        tolerance = {
            "rss_mb": self.config.rss_tolerance_mb,
            "disk_mb": self.config.disk_tolerance_mb,
        }
        found = [
            f"{name} grew by {delta:g} (tolerance {tolerance.get(name, 0)})"
            for name, delta in self.growth().items()
            if delta > tolerance.get(name, 0)
        ]
        if self.finished != self.submitted:
            found.append(f"{self.submitted - self.finished} episodes submitted but never finished")
        return found

    def problems(self) -> list[str]:
        """Leaks, lost episodes, and episodes the infrastructure failed (none are expected
        without injected faults; a soak whose episodes all fail would measure nothing)."""
        infra = sum(
            n for key, n in self.outcomes.items() if not key.startswith(("passed", "agent"))
        )
        broken = [f"{infra} episodes did not complete: {self.outcomes}"] if infra else []
        if not self.growth():  # a soak too short to compare anything must not pass as clean
            broken.append(
                f"{len(self.samples)} checkpoints: too few to judge growth (the baseline is "
                f"checkpoint {self.config.warmup_checkpoints + 1}, two more must follow it); "
                "run longer or sample more often"
            )
        return self.leaks() + broken

    def to_json(self) -> dict[str, Any]:
        return {
            "config": dataclasses.asdict(self.config),
            "samples": [dataclasses.asdict(s) for s in self.samples],
            "outcomes": self.outcomes,
            "submitted": self.submitted,
            "finished": self.finished,
            "baseline_index": self.config.warmup_checkpoints + 1,
            "growth": self.growth(),
            "leaks": self.leaks(),
            "problems": self.problems(),
        }


def _outcome(record: RolloutFinished) -> str:
    if record.status == "completed":
        return "passed" if record.passed else "agent-failed"
    return f"{record.status}: {record.reason}"[:80]


async def run_soak(
    config: SoakConfig, *, on_sample: Callable[[ResourceSample], None] | None = None
) -> SoakReport:
    """Run the soak; the report holds every checkpoint.

    :raises SoakStalledError: no episode finished for `config.stall_s` seconds.
    """
    report = SoakReport(config)
    kinds = sorted(EPISODES)
    actions = ScriptedActions(EPISODES)
    spec = SandboxSpec(backend=config.backend, timeout_s=10.0)
    async with contextlib.AsyncExitStack() as stack:
        work_root: Path | None = None
        docker: aiodocker.Docker | None = None
        options: dict[str, Any] = {}
        if config.backend == "process":
            work_root = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="roost-soak-")))
            work_root.chmod(0o755)  # as root, the sandbox drops to an unprivileged uid
            options["base_dir"] = work_root
        elif config.backend in ("docker", "gvisor"):
            docker = aiodocker.Docker()
            stack.push_async_callback(docker.close)
            options["docker"] = docker
        probe = ResourceProbe(work_root=work_root, docker=docker)

        def factory(key: str) -> Any:
            sandbox = create_sandbox(spec, **options)
            probe.track(sandbox.id)
            return sandbox

        pool = await stack.enter_async_context(SandboxPool(factory, capacity=config.concurrency))
        driver = await stack.enter_async_context(
            EpisodeDriver(pool, actions, workers=config.concurrency)
        )
        started = anyio.current_time()

        async def checkpoint() -> None:
            await pool.settle()
            sample = await probe.sample(
                elapsed_s=anyio.current_time() - started, episodes=report.finished
            )
            report.samples.append(sample)
            if on_sample is not None:
                on_sample(sample)

        await checkpoint()
        end = started + config.duration_s
        next_checkpoint = started + min(config.interval_s, config.duration_s)
        in_flight = 0
        while True:
            now = anyio.current_time()
            while now < min(next_checkpoint, end) and in_flight < config.concurrency:
                kind = kinds[report.submitted % len(kinds)]
                request = RolloutRequest(
                    rollout_id=f"soak-{report.submitted}", task_id=kind, max_steps=2, deadline_s=60
                )
                await driver.submit(request)
                report.submitted += 1
                in_flight += 1
            if in_flight == 0:  # drained: sample in the same idle state every time
                await checkpoint()
                if now >= end:
                    break
                # Counted from the end of this checkpoint, so no window is empty.
                next_checkpoint = min(end, anyio.current_time() + config.interval_s)
                continue
            try:
                record = await driver.next_finished(timeout=config.stall_s)
            except TimeoutError:
                raise SoakStalledError(
                    f"no episode finished in {config.stall_s}s with {in_flight} in flight"
                ) from None
            in_flight -= 1
            report.finished += 1
            key = _outcome(record)
            report.outcomes[key] = report.outcomes.get(key, 0) + 1
    return report


def write_json(report: SoakReport, path: str | Path) -> None:
    Path(path).write_text(json.dumps(report.to_json(), indent=2) + "\n")
