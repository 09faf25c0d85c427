"""The model-side phases that run outside the actor loop: building policies, the SFT warm
start, saving and loading weights. CPU-heavy calls are made from the loop through
`anyio.to_thread.run_sync` by the caller.
"""

from __future__ import annotations

import io
import os
import pickle
import platform
import random
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import torch

from policies.neural import use_threads
from policies.sft import SFTConfig, SFTResult, sft
from policies.transformer import TransformerConfig, TransformerPolicy, cpu_multiplies_bf16
from roost.train.config import INFERENCE_DTYPES, ModelConfig, SFTSection
from roost.train.rundir import write_atomic

__all__ = [
    "SFTStopped",
    "describe_machine",
    "load_weights",
    "make_policy",
    "run_sft",
    "save_weights",
    "weights_dtype",
]


class SFTStopped(Exception):
    """The run was asked to stop during the warm start."""


def describe_machine() -> dict[str, Any]:
    """Where this segment ran (the policy takes CUDA when there is one): rates mean little
    without it, and a resumed run may continue elsewhere."""
    cuda = torch.cuda.is_available()
    return {
        "device": "cuda" if cuda else "cpu",
        "device_name": torch.cuda.get_device_name(0) if cuda else platform.machine(),
        "cpus": os.cpu_count(),
        # What `model.inference_dtype = "auto"` chose from (the generator's speed hangs on it).
        "cpu_bf16": cpu_multiplies_bf16(),
        "torch": torch.__version__,
        "python": platform.python_version(),
    }


def make_policy(config: ModelConfig, *, seed: int, dtype: str = "float32") -> TransformerPolicy:
    """The experiment's model, its weights in `dtype` (a setting, as `weights_dtype` reads
    it: `model.inference_dtype` for the RL phase's models that only infer)."""
    model = TransformerConfig(
        d_model=config.d_model,
        n_layers=config.n_layers,
        n_heads=config.n_heads,
        max_len=config.max_len,
    )
    return TransformerPolicy(model, seed=seed, dtype=weights_dtype(dtype))


def weights_dtype(setting: str) -> torch.dtype:
    """A dtype setting on this machine ("auto": bf16 on a CPU that multiplies it in
    hardware, else fp32; on CUDA fp32 weights, since autocast computes in bf16).

    :raises ValueError: not one of "auto", "float32", "bfloat16".
    """
    if setting not in INFERENCE_DTYPES:
        raise ValueError(f"dtype: one of {', '.join(INFERENCE_DTYPES)}, got {setting!r}")
    if setting == "bfloat16":
        return torch.bfloat16
    if setting == "auto" and not torch.cuda.is_available() and cpu_multiplies_bf16():
        return torch.bfloat16
    return torch.float32


def save_weights(policy: TransformerPolicy, path: Path, **extra: Any) -> None:
    """The model's weights (and `extra`), written atomically."""
    buffer = io.BytesIO()
    torch.save({"model": policy.state_dict(), "version": policy.version, **extra}, buffer)
    write_atomic(path, buffer.getvalue())


def load_weights(policy: TransformerPolicy, path: Path, *, version: int | None = None) -> None:
    """:raises ValueError: the file is not a weights file of this model's shape."""
    try:
        data = torch.load(path, map_location="cpu", weights_only=True)
        state = data["model"] if isinstance(data, dict) and "model" in data else data
        if isinstance(state, dict) and "pos.weight" in state:
            raise ValueError(
                f"{path}: weights of the model with a learned position table; the model now "
                "uses rotary positions (no table), so these weights cannot be loaded: "
                "train them anew"
            )
        policy.load_state_dict(state, int(data.get("version", 0)) if version is None else version)
    except (OSError, KeyError, RuntimeError, TypeError, pickle.UnpicklingError) as exc:
        raise ValueError(f"{path}: not usable weights for this model: {exc}") from None


def run_sft(
    policy: TransformerPolicy,
    pairs: Sequence[tuple[str, str]],
    config: SFTSection,
    *,
    seed: int,
    time_budget_s: float,
    stop: threading.Event,
    progress: Callable[[int, float], None] | None = None,
) -> SFTResult:
    """The warm start, in the calling thread; raises `SFTStopped` soon after `stop` is set."""

    def check(step: int, loss: float) -> None:
        if progress is not None:
            progress(step, loss)
        if stop.is_set():
            raise SFTStopped

    shuffled = list(pairs)
    random.Random(seed).shuffle(shuffled)
    use_threads(0)  # every core, in whichever worker thread (the control runs after RL)
    return sft(
        policy,
        shuffled,
        SFTConfig(
            steps=config.max_steps,
            batch_size=config.batch_size,
            lr=config.lr,
            decay=config.lr_decay,
            time_budget_s=time_budget_s,
            seed=seed,
        ),
        on_step=check,
    )
