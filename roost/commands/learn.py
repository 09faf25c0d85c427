"""`roost sft`: a supervised warm start of the default model on (prompt, completion) pairs."""

from __future__ import annotations

import json
from pathlib import Path

import click


@click.command("sft")
@click.option(
    "--data",
    "data_path",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    required=True,
    help='JSONL, one {"prompt": ..., "completion": ...} object a line.',
)
@click.option(
    "--out", type=click.Path(path_type=Path), required=True, help="Weights file to write."
)
@click.option("--steps", type=click.IntRange(min=1), default=200, show_default=True)
@click.option("--batch-size", type=click.IntRange(min=1), default=32, show_default=True)
@click.option("--lr", type=click.FloatRange(min=0, min_open=True), default=1e-3, show_default=True)
@click.option("--time-budget", type=click.FloatRange(min=0), help="Stop after this many seconds.")
@click.option("--seed", type=int, default=0, show_default=True)
def sft_command(
    data_path: Path,
    out: Path,
    steps: int,
    batch_size: int,
    lr: float,
    time_budget: float | None,
    seed: int,
) -> None:
    """Train the default small transformer on demonstrations; write its weights to OUT."""
    import torch

    from policies.sft import SFTConfig, sft
    from policies.transformer import TransformerPolicy

    try:
        # Checked before the data is read and the model built: SFTConfig names a bad value
        # (a NaN rate, say) that click's ranges let through.
        config = SFTConfig(
            steps=steps, batch_size=batch_size, lr=lr, time_budget_s=time_budget, seed=seed
        )
    except ValueError as exc:
        raise click.UsageError(str(exc)) from None
    try:
        text = data_path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) else f"not UTF-8 text (byte {exc.start})"
        raise click.BadParameter(f"{data_path}: {reason}", param_hint="--data") from None
    pairs: list[tuple[str, str]] = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
            pairs.append((str(row["prompt"]), str(row["completion"])))
        except (ValueError, KeyError, TypeError) as exc:
            raise click.BadParameter(
                f"line {number}: expected an object with 'prompt' and 'completion' ({exc})",
                param_hint="--data",
            ) from None
    policy = TransformerPolicy(seed=seed)
    try:
        result = sft(policy, pairs, config)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--data") from None
    out.parent.mkdir(parents=True, exist_ok=True)
    torch.save({"model": policy.state_dict(), "version": 0}, out)
    click.echo(
        f"{result.steps} steps in {result.seconds:.1f} s; loss {result.losses[0]:.3f} -> "
        f"{result.losses[-1]:.3f}; weights in {out}"
    )
