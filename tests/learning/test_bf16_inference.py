"""A policy whose weights are stored in bf16 (the RL generator's and the KL reference's on a CPU
that multiplies bf16 in hardware): it loads fp32 weights, samples what they would, and reports
log-probabilities close to theirs, in fp32."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from policies.neural import generate
from policies.transformer import TransformerConfig, TransformerPolicy, cpu_multiplies_bf16
from roost.train import phases
from roost.train.config import load_train_config

SMALL = TransformerConfig(d_model=64, n_layers=2, n_heads=2, max_len=96)


def _pair() -> tuple[TransformerPolicy, TransformerPolicy]:
    full = TransformerPolicy(SMALL, device="cpu", seed=3)
    half = TransformerPolicy(SMALL, device="cpu", seed=0, dtype=torch.bfloat16)
    half.load_state_dict(full.state_dict(), version=5)
    return full, half


def test_fp32_weights_load_into_bf16_and_the_rotary_frequencies_stay_fp32() -> None:
    full, half = _pair()
    assert {p.dtype for p in half.parameters()} == {torch.bfloat16}
    assert half.model.inv_freq.dtype == torch.float32
    assert torch.equal(half.model.inv_freq, full.model.inv_freq)
    assert half.version == 5
    for name, value in full.state_dict().items():  # each weight rounded, none left behind
        assert torch.equal(half.state_dict()[name], value.to(torch.bfloat16)), name


def test_bf16_samples_carry_fp32_logprobs_close_to_the_fp32_model() -> None:
    full, half = _pair()
    prompts = [[257, *range(97, 97 + 5 + i % 7), 61] for i in range(12)]
    samples = generate(half, prompts, max_new_tokens=16, temperature=1.0, seed=11)
    assert all(s.tokens for s in samples)
    decoding = half.start(prompts, max_new_tokens=4, temperature=1.0, seed=1)
    assert decoding.logprobs.dtype == torch.float32
    exact, mask = full.token_logprobs(prompts, [s.tokens for s in samples])
    drift = [
        abs(b - a)
        for s, row in zip(samples, exact.tolist(), strict=True)
        for b, a in zip(s.logprobs, row, strict=False)
    ]
    assert len(drift) == int(mask.sum())
    # bf16 keeps about 3 significant digits: the behaviour log-probabilities the learner
    # weighs by are off by a hundredth or so, not by the size of an update.
    assert sum(drift) / len(drift) < 0.05
    ref, _ = half.token_logprobs(prompts, [s.tokens for s in samples])
    assert ref.dtype == torch.float32
    assert torch.allclose(ref * mask, exact * mask, atol=0.25)


def test_greedy_decoding_in_bf16_mostly_agrees_with_fp32() -> None:
    full, half = _pair()
    prompts = [[257, *range(98, 98 + 3 + i % 5), 61] for i in range(8)]
    a = generate(full, prompts, max_new_tokens=6, temperature=0)
    b = generate(half, prompts, max_new_tokens=6, temperature=0)
    # A random model's near ties may round the other way; most first tokens must agree.
    assert sum(x.tokens[0] == y.tokens[0] for x, y in zip(a, b, strict=True)) >= 6


def test_only_fp32_and_bf16_weights_are_offered() -> None:
    with pytest.raises(ValueError, match="dtype: float32 or bfloat16"):
        TransformerPolicy(SMALL, device="cpu", dtype=torch.float16)


@pytest.mark.parametrize(
    ("flags", "expected"),
    [
        ("fpu sse avx512f amx_bf16 amx_tile", True),
        ("fpu sse avx512f avx512_bf16", True),
        ("fpu sse avx2 avx512f", False),
    ],
)
def test_bf16_hardware_is_read_from_the_cpu_flags(
    tmp_path: Path, flags: str, expected: bool
) -> None:
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text(f"processor\t: 0\nmodel name\t: x\nflags\t\t: {flags}\n")
    assert cpu_multiplies_bf16(str(cpuinfo)) is expected


def test_unreadable_cpu_flags_mean_no_bf16(tmp_path: Path) -> None:
    assert cpu_multiplies_bf16(str(tmp_path / "absent")) is False


@pytest.mark.parametrize(
    ("setting", "hardware", "expected"),
    [
        ("auto", True, torch.bfloat16),
        ("auto", False, torch.float32),
        ("float32", True, torch.float32),
        ("bfloat16", False, torch.bfloat16),
    ],
)
def test_a_dtype_setting_on_a_cpu(
    monkeypatch: pytest.MonkeyPatch, setting: str, hardware: bool, expected: torch.dtype
) -> None:
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(phases, "cpu_multiplies_bf16", lambda: hardware)
    assert phases.weights_dtype(setting) == expected
    config = load_train_config(overrides=["model.d_model=32", f"model.inference_dtype={setting}"])
    built = phases.make_policy(config.model, seed=0, dtype=config.model.inference_dtype)
    assert next(iter(built.parameters())).dtype == expected
    learner = phases.make_policy(config.model, seed=0)  # the learner's weights: always fp32
    assert next(iter(learner.parameters())).dtype == torch.float32


def test_an_unknown_dtype_setting_is_refused() -> None:
    with pytest.raises(ValueError, match="dtype: one of auto, float32, bfloat16, got 'half'"):
        phases.weights_dtype("half")
