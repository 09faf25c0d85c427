"""Training tests run real episodes in the process backend (bubblewrap) on the real clock.

A tiny model and a handful of tasks keep each run to seconds. Outside CI a missing bubblewrap
skips them; in CI (`CI=true`) it fails them (see tests/sandboxes/conftest.py).
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

import msgspec
import pytest

from roost.train.config import TrainConfig, load_train_config

IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")

TINY = """
name = "tiny"
[tasks]
levels = [1, 2]
demo_levels = [1]
heldout_per_level = 3
demos_per_level = 40
[episode]
group_size = 2
max_turns = 2
[model]
d_model = 32
n_layers = 1
n_heads = 2
max_len = 256
max_new_tokens = 16
[sft]
time_budget_s = 1
max_steps = 3
batch_size = 8
[rl]
time_budget_s = 60
max_versions = 3
[learner]
batch_size = 4
minibatches = 2
checkpoint_every = 1
skip_equal_reward_groups = false
[scheduler]
workers = 6
[sandbox]
pool_capacity = 4
[eval]
max_turns = 1
concurrency = 4
[view]
live = "off"
interval_s = 0.5
metrics_interval_s = 0.5
"""


@pytest.fixture
def anyio_backend() -> Any:
    return ("asyncio", {})


@pytest.fixture
def tiny_config(tmp_path: Path) -> TrainConfig:
    if shutil.which("bwrap") is None:
        if IN_CI:
            pytest.fail("bubblewrap is missing: the process backend cannot run in CI")
        pytest.skip("bubblewrap is not installed")
    path = tmp_path / "tiny.toml"
    path.write_text(TINY)
    return load_train_config(path)


def with_max_versions(config: TrainConfig, versions: int) -> TrainConfig:
    return msgspec.structs.replace(
        config, rl=msgspec.structs.replace(config.rl, max_versions=versions)
    )


async def train_stopped_at(config: TrainConfig, out: Path, *, stop_at: int) -> dict[str, Any]:
    """Run `config` in `out`, stopping (as Ctrl-C does) once the learner reaches `stop_at`: a
    resumable run for the resume tests. Returns the summary."""
    from roost.train.run import TrainHooks, train

    hooks = TrainHooks()

    def stop(version: int) -> None:
        if version >= stop_at:
            hooks.stop.set()

    hooks.on_version = stop
    return await train(config, out, hooks=hooks)
