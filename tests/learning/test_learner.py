"""The learner: it learns, it checkpoints and resumes exactly, and the loop keeps its bound."""

from __future__ import annotations

import random
import re
from pathlib import Path

import pytest
import torch

from actors._grpo import LossConfig, micro_batches, split_groups
from actors._learner_core import (
    CorruptCheckpointError,
    LearnerConfig,
    LearnerCore,
    Trajectory,
    load_checkpoint,
)
from actors.learner import Learner
from policies.neural import generate
from policies.staleness import StalenessBook
from policies.transformer import TransformerPolicy
from tests.learning._tiny import tiny_policy

PROMPT = [257, 120, 61]  # BOS "x="


def _lowercase_share(tokens: list[int]) -> float:
    return sum(97 <= t <= 122 for t in tokens) / 4


def _groups(
    policy: TransformerPolicy, step: int, groups: int = 4, size: int = 8
) -> list[list[Trajectory]]:
    out = []
    for g in range(groups):
        samples = generate(policy, [PROMPT] * size, max_new_tokens=4, seed=step * 100 + g)
        out.append(
            [
                Trajectory(
                    rollout_id=f"s{step}g{g}m{i}",
                    prompt=PROMPT,
                    completion=s.tokens,
                    logprobs=s.logprobs,
                    versions=s.versions,
                    reward=_lowercase_share(s.tokens),
                )
                for i, s in enumerate(samples)
            ]
        )
    return out


def _mean_reward(policy: TransformerPolicy) -> float:
    samples = generate(policy, [PROMPT] * 128, max_new_tokens=4, seed=12345)
    return sum(_lowercase_share(s.tokens) for s in samples) / len(samples)


@pytest.mark.parametrize("correction", ["decoupled", "truncated_is"])
def test_the_learner_learns_a_trivial_task(correction: str) -> None:
    # Reward: the share of lowercase letters among 4 sampled bytes (about 0.1 at random).
    # A sign error or a detached loss leaves it there or drives it to zero.
    torch.manual_seed(0)
    policy = tiny_policy()
    core = LearnerCore(policy, LearnerConfig(batch_size=32, lr=1e-2, correction=correction, k=0))
    before = _mean_reward(policy)
    for step in range(25):
        stats = core.update(_groups(policy, step))
    after = _mean_reward(policy)
    assert before < 0.25
    assert after > 0.6, (before, after)
    assert stats.loss.tokens > 0


def test_resume_gives_a_bit_identical_next_step(tmp_path: Path) -> None:
    # With a warm-up still under way: the resumed step must use the rate of version 1.
    config = LearnerConfig(
        batch_size=16, lr=3e-3, correction="decoupled", keep_checkpoints=5, warmup_steps=3
    )
    first = tiny_policy(seed=3)
    core = LearnerCore(first, config)
    batches = [_groups(tiny_policy(seed=9), step, groups=2) for step in range(3)]
    core.update(batches[0])
    core.curriculum = b"level=2"
    random.seed(7)
    core.save(tmp_path)
    core.update(batches[1])
    expected = {k: v.clone() for k, v in first.state_dict().items()}

    resumed_policy = tiny_policy(seed=42)  # different init: everything must come from the file
    ckpt = load_checkpoint(tmp_path)
    resumed = LearnerCore(resumed_policy, config, resume=ckpt)
    assert resumed.version == 1
    assert resumed.curriculum == b"level=2"
    assert resumed.consumed == {t.rollout_id for g in batches[0] for t in g}
    resumed.update(batches[1])
    got = resumed_policy.state_dict()
    assert all(torch.equal(expected[k], got[k]) for k in expected)


def test_a_resumed_learner_reopens_admission_for_k_plus_one_batches(tmp_path: Path) -> None:
    # Before, the book of a resumed run counted no earlier rollout: at version v it admitted
    # v + k + 1 batches at once, and the learner then stalled on them past the bound.
    config = LearnerConfig(batch_size=4, k=2)
    core = LearnerCore(tiny_policy(seed=3), config)
    core.update(_groups(tiny_policy(seed=9), 0, groups=1, size=4))
    core.update(_groups(tiny_policy(seed=9), 1, groups=1, size=4))
    book = StalenessBook(2, 4)
    Learner(tiny_policy(seed=3), config, book=book, resume=load_checkpoint(core.save(tmp_path)))
    assert book.version == 2
    assert book.admits(11)
    assert not book.admits(12)


def test_the_learning_rate_warms_up_linearly_by_version() -> None:
    core = LearnerCore(tiny_policy(), LearnerConfig(batch_size=8, lr=1e-3, warmup_steps=4))
    assert [core.lr_at(v) for v in range(6)] == pytest.approx(
        [2.5e-4, 5e-4, 7.5e-4, 1e-3, 1e-3, 1e-3]
    )
    used = []
    for step in range(2):
        core.update(_groups(core.policy, step, groups=1))  # type: ignore[arg-type]
        used.append(core.optimizer.param_groups[0]["lr"])
    assert used == pytest.approx([2.5e-4, 5e-4])
    flat = LearnerCore(tiny_policy(), LearnerConfig(batch_size=8, lr=1e-3))
    assert flat.lr_at(0) == flat.lr_at(50) == 1e-3


def test_checkpoints_are_atomic_and_pruned(tmp_path: Path) -> None:
    core = LearnerCore(tiny_policy(), LearnerConfig(batch_size=8, keep_checkpoints=2))
    for step in range(3):
        core.update(_groups(core.policy, step, groups=1))  # type: ignore[arg-type]
        core.save(tmp_path)
    names = sorted(p.name for p in tmp_path.iterdir())
    assert names == ["ckpt-00000002.pt", "ckpt-00000003.pt"]
    assert load_checkpoint(tmp_path).version == 3
    with pytest.raises(FileNotFoundError):
        load_checkpoint(tmp_path / "nothing-here")


@pytest.mark.parametrize(
    ("damage", "fault"),
    [
        ("empty", "empty checkpoint file"),
        ("truncated", "unreadable checkpoint, truncated or corrupt"),
        ("garbage", "unreadable checkpoint, truncated or corrupt"),
        ("a list", "holds a list, not a checkpoint"),
        ("no optimizer", "incomplete checkpoint, no optimizer"),
    ],
)
def test_a_corrupt_checkpoint_gets_an_error_naming_the_file_and_the_fault(
    tmp_path: Path, damage: str, fault: str
) -> None:
    # Before, a truncated file raised `OSError: [Errno 22]` and an empty one a bare EOFError.
    core = LearnerCore(tiny_policy(), LearnerConfig(batch_size=8))
    path = core.save(tmp_path)
    whole = path.read_bytes()
    if damage == "empty":
        path.write_bytes(b"")
    elif damage == "truncated":
        path.write_bytes(whole[: len(whole) // 2])
    elif damage == "garbage":
        path.write_bytes(b"not a checkpoint" * 64)
    elif damage == "a list":
        torch.save([1, 2], path)
    else:
        data = torch.load(path, weights_only=False)
        del data["optimizer"]
        torch.save(data, path)
    with pytest.raises(CorruptCheckpointError, match=f"^{re.escape(str(path))}: {fault}"):
        load_checkpoint(tmp_path)  # the newest in the directory: the error names which
    assert issubclass(CorruptCheckpointError, ValueError)


def test_malformed_trajectories_are_refused() -> None:
    with pytest.raises(ValueError, match="differ in length"):
        Trajectory(
            rollout_id="r", prompt=[1], completion=[1, 2], logprobs=[0.0], versions=[0], reward=0
        )
    with pytest.raises(ValueError, match="empty prompt"):
        Trajectory(rollout_id="r", prompt=[], completion=[], logprobs=[], versions=[], reward=0)


def test_micro_batches_sort_by_length_and_keep_to_the_token_budget() -> None:
    lengths = [90, 10, 300, 12, 95, 11, 400]
    groups = micro_batches(lengths, max_tokens=300)
    assert sorted(i for g in groups for i in g) == list(range(len(lengths)))  # each once
    for g in groups:
        assert len(g) == 1 or len(g) * max(lengths[i] for i in g) <= 300
    assert groups[0] == [1, 5, 3]  # the short first attempts together, not padded to 400
    assert [6] in groups  # longer than the budget: alone


def test_a_step_in_micro_batches_is_the_step_on_the_whole_batch() -> None:
    # Mixed lengths (long revision prompts beside short first attempts), a KL anchor and
    # stale tokens: one pass and many micro-batches must give the same gradient (compared
    # as gradients: Adam's first step is nearly sign(g) and would hide a wrong scale).
    def step(max_tokens: int) -> dict[str, torch.Tensor]:
        policy = tiny_policy(seed=3)
        config = LearnerConfig(
            batch_size=4,
            max_grad_norm=1e9,
            micro_batch_tokens=max_tokens,
            loss=LossConfig(kl_coef=0.1),
        )
        core = LearnerCore(policy, config, reference=tiny_policy(seed=3))
        groups = _groups(tiny_policy(seed=9), 0, groups=2, size=4)
        long_prompt = PROMPT * 6
        groups[1] = [
            Trajectory(t.rollout_id, long_prompt, t.completion, t.logprobs, t.versions, t.reward)
            for t in groups[1]
        ]
        stats = core.update(groups)
        assert stats.samples == 8
        return {n: p.grad.clone() for n, p in policy.model.named_parameters() if p.grad is not None}

    whole, pieces = step(1 << 20), step(1)  # 1: every sample on its own
    assert whole
    assert whole.keys() == pieces.keys()
    for name, value in whole.items():
        assert torch.allclose(value, pieces[name], rtol=1e-4, atol=1e-7), name


def test_split_groups_keeps_groups_whole_and_balances_samples() -> None:
    groups = [["a"] * 8, ["b"] * 3, ["c"] * 5, ["d"] * 5, ["e"] * 2]
    parts = split_groups(groups, 2)
    assert sorted(sum(len(g) for g in part) for part in parts) == [11, 12]
    assert sorted(g[0] for part in parts for g in part) == ["a", "b", "c", "d", "e"]
    assert all(part == sorted(part, key=groups.index) for part in parts)  # the batch's order
    assert len(split_groups(groups[:2], 4)) == 2  # never an empty minibatch
    assert split_groups([], 3) == []


def test_minibatches_step_once_per_share_and_publish_one_version() -> None:
    # A version of two minibatches is exactly two versions of one each, on the same shares
    # (equal groups alternate between the shares: 0 and 2, then 1 and 3).
    groups = _groups(tiny_policy(seed=9), 0, groups=4, size=4)
    split = LearnerCore(tiny_policy(seed=3), LearnerConfig(lr=3e-3, minibatches=2))
    stats = split.update(groups)
    assert (stats.version, stats.optimizer_steps, stats.samples) == (1, 2, 16)
    assert stats.grad_norm > 0
    assert split.consumed == {t.rollout_id for g in groups for t in g}
    steps = {int(s["step"]) for s in split.optimizer.state_dict()["state"].values()}
    assert steps == {2}
    plain = LearnerCore(tiny_policy(seed=3), LearnerConfig(lr=3e-3))
    plain.update([groups[0], groups[2]])
    plain.update([groups[1], groups[3]])
    after, expected = split.policy.state_dict(), plain.policy.state_dict()
    assert all(torch.equal(after[k], expected[k]) for k in expected)
    with pytest.raises(ValueError, match="minibatches must be >= 1, got 0"):
        LearnerCore(tiny_policy(seed=0), LearnerConfig(minibatches=0))


def test_an_update_that_raises_part_way_is_undone_and_its_retry_trains_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The second of three minibatch steps raises: the first step's change to the weights, the
    # optimizer, the average and the rehearsal draws is undone, so the retried batch ends
    # exactly where an update that never failed does.
    groups = _groups(tiny_policy(seed=9), 0, groups=3, size=4)
    demos = [([257, 120, 61], [97, 98, 99, 258])] * 4
    config = LearnerConfig(lr=3e-3, minibatches=3, average_decay=0.9, demo_coef=1.0)
    clean = LearnerCore(tiny_policy(seed=3), config, demonstrations=demos)
    clean.update(groups)
    core = LearnerCore(tiny_policy(seed=3), config, demonstrations=demos)
    before = core.policy.state_dict()
    real_step = LearnerCore._optimizer_step
    calls = []

    def fail_second(self: LearnerCore, part: list[list[Trajectory]]) -> object:
        calls.append(len(part))
        if len(calls) == 2:
            raise RuntimeError("out of memory")
        return real_step(self, part)

    monkeypatch.setattr(LearnerCore, "_optimizer_step", fail_second)
    with pytest.raises(RuntimeError, match="out of memory"):
        core.update(groups)
    assert (core.version, core.policy.version, core.consumed) == (0, 0, set())
    now = core.policy.state_dict()
    assert all(torch.equal(now[k], before[k]) for k in before)
    assert core.optimizer.state_dict()["state"] == {}
    assert core.average is not None
    assert all(torch.equal(core.average[k], before[k]) for k in before)
    assert all(p.grad is None for p in core.policy.parameters())

    monkeypatch.setattr(LearnerCore, "_optimizer_step", real_step)
    stats = core.update(groups)
    assert (stats.version, stats.optimizer_steps) == (1, 3)
    after, expected = core.policy.state_dict(), clean.policy.state_dict()
    assert all(torch.equal(after[k], expected[k]) for k in expected)
    assert clean.average is not None
    assert all(torch.equal(core.average[k], clean.average[k]) for k in expected)
    steps = {int(s["step"]) for s in core.optimizer.state_dict()["state"].values()}
    assert steps == {3}


def test_a_learner_refuses_an_unknown_baseline_or_scale_or_an_empty_micro_batch() -> None:
    with pytest.raises(ValueError, match="unknown baseline 'turns'; choose one of group, turn"):
        LearnerCore(tiny_policy(seed=0), LearnerConfig(baseline="turns"))
    with pytest.raises(ValueError, match="unknown advantage scale 'mean'; choose one of std, none"):
        LearnerCore(tiny_policy(seed=0), LearnerConfig(advantage_scale="mean"))
    with pytest.raises(ValueError, match="micro_batch_tokens must be >= 1, got 0"):
        LearnerCore(tiny_policy(seed=0), LearnerConfig(micro_batch_tokens=0))


def test_the_weight_average_follows_each_step_and_survives_a_resume(tmp_path: Path) -> None:
    config = LearnerConfig(batch_size=16, lr=3e-3, average_decay=0.75, keep_checkpoints=5)
    policy = tiny_policy(seed=3)
    start = policy.state_dict()
    core = LearnerCore(policy, config)
    batches = [_groups(tiny_policy(seed=9), step, groups=2) for step in range(3)]
    core.update(batches[0])
    after_one = policy.state_dict()
    assert core.average is not None
    for name, mean in core.average.items():
        torch.testing.assert_close(mean, 0.75 * start[name] + 0.25 * after_one[name])
    assert any(not torch.equal(core.average[k], after_one[k]) for k in after_one)

    ckpt = load_checkpoint(core.save(tmp_path))
    assert ckpt.average is not None
    core.update(batches[1])
    resumed = LearnerCore(tiny_policy(seed=42), config, resume=ckpt)
    resumed.update(batches[1])
    assert resumed.average is not None
    assert all(torch.equal(core.average[k], resumed.average[k]) for k in core.average)


def test_without_averaging_no_average_is_kept_or_saved(tmp_path: Path) -> None:
    core = LearnerCore(tiny_policy(seed=3), LearnerConfig(batch_size=16))
    core.update(_groups(tiny_policy(seed=9), 0, groups=2))
    assert core.average is None
    assert load_checkpoint(core.save(tmp_path)).average is None
    with pytest.raises(ValueError, match="average_decay"):
        LearnerCore(tiny_policy(seed=0), LearnerConfig(average_decay=1.0))
