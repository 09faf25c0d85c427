"""The supervised warm start."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from policies.neural import generate
from policies.sft import SFTConfig, lr_at, sft
from policies.tokenizer import ByteTokenizer
from roost.commands.learn import sft_command
from tests.learning._tiny import tiny_policy


def test_sft_teaches_the_demonstrations() -> None:
    policy = tiny_policy()
    pairs = [("ab=", "ba"), ("cd=", "dc")]
    result = sft(policy, pairs, SFTConfig(steps=150, batch_size=8, lr=1e-2))
    assert result.losses[-1] < 0.2 * result.losses[0]
    tok = ByteTokenizer()
    out = generate(policy, [tok.encode("ab=")], max_new_tokens=4, temperature=0)
    assert tok.decode(out[0].tokens) == "ba"
    assert policy.version == 0  # SFT does not publish a version


def test_sft_refuses_empty_data() -> None:
    with pytest.raises(ValueError, match="at least one"):
        sft(tiny_policy(), [])
    with pytest.raises(ValueError, match="empty prompt"):
        sft(tiny_policy(), [("", "x")])


def test_roost_sft_writes_weights_and_names_a_bad_line(tmp_path: Path) -> None:
    data = tmp_path / "pairs.jsonl"
    data.write_text(
        '{"prompt": "ab=", "completion": "ba"}\n\n{"prompt": "cd=", "completion": "dc"}\n'
    )
    out = tmp_path / "w.pt"
    runner = CliRunner()
    args = ["--data", str(data), "--out", str(out), "--steps", "2", "--batch-size", "2"]
    result = runner.invoke(sft_command, args)
    assert result.exit_code == 0, result.output
    assert out.exists()
    assert "2 steps" in result.output
    data.write_text('{"prompt": "ab="}\n')
    result = runner.invoke(sft_command, args)
    assert result.exit_code == 2
    assert "line 1" in result.output


def test_linear_decay_falls_to_zero_by_the_step_count_or_the_time_budget() -> None:
    by_steps = SFTConfig(steps=10, lr=1e-2, decay="linear")
    assert [lr_at(by_steps, s, 0.0) for s in (0, 5, 9)] == pytest.approx([1e-2, 5e-3, 1e-3])
    by_time = SFTConfig(steps=1_000, lr=1e-2, decay="linear", time_budget_s=100.0)
    # the time budget is nearer its end: 75 % of it gone, 5 points of lead forgiven
    assert lr_at(by_time, 1, 75.0) == pytest.approx(1e-2 * (1 - 0.70 / 0.95))
    assert lr_at(by_time, 1, 130.0) == 0.0
    # Ahead of its time budget, a run's rates depend on its steps alone: reproducible.
    ahead = SFTConfig(steps=10, lr=1e-2, decay="linear", time_budget_s=100.0)
    assert [lr_at(ahead, s, 9.9 * s + 0.3) for s in range(10)] == [
        lr_at(by_steps, s, 0.0) for s in range(10)
    ]
    # So is one on pace whose early steps ran slow, its clock briefly ahead (measured with a
    # 2 s first step: step 5 at 4.2 s of 330, 0.66 % of the steps and 1.27 % of the time).
    default = SFTConfig(steps=760, lr=2e-3, decay="linear", time_budget_s=330.0)
    assert lr_at(default, 5, 4.19) == 2e-3 * (1 - 5 / 760)
    assert lr_at(SFTConfig(steps=10, lr=1e-2), 9, 99.0) == 1e-2  # constant: the default
    with pytest.raises(ValueError, match="unknown decay 'cosine'"):
        SFTConfig(decay="cosine")
