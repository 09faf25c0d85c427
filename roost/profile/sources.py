"""Read what a run left behind into timing rows and metric snapshots.

A run directory holds `metrics.jsonl` (runtime snapshots, one a line) and the timing rows as
`rollouts.jsonl` and `learner_steps.jsonl`. A final line cut short by a crash is dropped; any
other line that does not parse is an error naming the file and the line.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import msgspec

from roost.profile.model import LearnerStep, RolloutTiming

__all__ = ["ProfileInputError", "RunInputs", "load_run", "read_jsonl", "write_jsonl"]

T = TypeVar("T")

ROLLOUTS = "rollouts.jsonl"
LEARNER_STEPS = "learner_steps.jsonl"
METRICS = "metrics.jsonl"


class ProfileInputError(ValueError):
    """A run directory that cannot be profiled, with the file and line at fault."""


class RunInputs(msgspec.Struct, kw_only=True):
    rollouts: list[RolloutTiming]
    steps: list[LearnerStep]
    metrics: list[dict[str, Any]]


def load_run(run_dir: str | Path) -> RunInputs:
    """The profile inputs of `run_dir`: `rollouts.jsonl` is required, the rest optional."""
    root = Path(run_dir)
    if not root.is_dir():
        raise ProfileInputError(f"{root}: not a directory")
    rollouts_path = root / ROLLOUTS
    if not rollouts_path.exists():
        raise ProfileInputError(
            f"{root}: no {ROLLOUTS}; `roost stress --profile DIR` records one, and a training "
            "run writes it at its end (`roost report RUN_DIR` rewrites it from the run log)"
        )
    rollouts = read_jsonl(rollouts_path, _decoder(RolloutTiming))
    steps_path = root / LEARNER_STEPS
    steps = read_jsonl(steps_path, _decoder(LearnerStep)) if steps_path.exists() else []
    metrics_path = root / METRICS
    metrics = read_jsonl(metrics_path, _json_object) if metrics_path.exists() else []
    return RunInputs(rollouts=rollouts, steps=steps, metrics=metrics)


def _decoder(kind: type[T]) -> Callable[[bytes], T]:
    decoder = msgspec.json.Decoder(kind)
    return decoder.decode


def _json_object(line: bytes) -> dict[str, Any]:
    """A metrics snapshot: its time `t` and the actors' `.handled` counters are numbers
    (`analyze` computes with them)."""
    value = json.loads(line)
    if not isinstance(value, dict):
        raise ValueError(f"expected a JSON object, got {type(value).__name__}")
    for key, item in value.items():
        if (key == "t" or (key.startswith("actor.") and key.endswith(".handled"))) and (
            isinstance(item, bool) or not isinstance(item, int | float) or not math.isfinite(item)
        ):
            raise ValueError(f"{key}: expected a finite number, got {item!r}")
    return value


def read_jsonl(path: Path, parse: Callable[[bytes], T]) -> list[T]:
    """Parse each line of `path`; a bad last line without its newline is a torn write, dropped.

    :raises ProfileInputError: the file cannot be read, or a line before the last does not
        parse (naming the file and the line).
    """
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise ProfileInputError(f"{path}: cannot read ({exc.strerror})") from None
    lines = data.split(b"\n")
    out: list[T] = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            out.append(parse(line))
        except (ValueError, msgspec.DecodeError, RecursionError) as exc:
            # RecursionError: json.loads recurses once per level of `[[[...`
            if number == len(lines):  # no newline after it: the writer died mid-line
                break
            reason = "nested too deeply" if isinstance(exc, RecursionError) else exc
            raise ProfileInputError(f"{path}:{number}: {reason}") from None
    return out


def write_jsonl(path: Path, rows: list[Any]) -> None:
    """Write `rows` (msgspec structs or dicts) as JSON lines, atomically."""
    encoder = msgspec.json.Encoder()
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "wb") as out:
        for row in rows:
            out.write(encoder.encode(row))
            out.write(b"\n")
    tmp.replace(path)
