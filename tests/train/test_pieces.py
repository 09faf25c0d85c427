"""The pure pieces of a training run: rewards, prompts, the task split, the report command."""

from __future__ import annotations

from pathlib import Path

import pytest
import structlog.testing
import torch
from click.testing import CliRunner

from policies.neural import Sample
from policies.tokenizer import ByteTokenizer
from roost.cli import cli
from roost.train.collector import episode_reward, relabelled_sample, turn_reward
from roost.train.config import ModelConfig, TasksConfig
from roost.train.episode import EpisodeTurn, encode_prompt
from roost.train.phases import load_weights, make_policy, save_weights
from roost.train.run import _warn_if_answers_cut
from roost.train.task_source import TaskSource, revision_prompt
from tasks import Verdict


def _turn(passed: bool, score: float) -> EpisodeTurn:
    verdict = Verdict(passed=passed, score=score, failure=None if passed else "agent")
    return EpisodeTurn([1], Sample([2], [0.0], [0]), "x", verdict, 0.1, 0.1)


def test_reward_is_one_for_a_first_turn_pass_less_for_later_and_partial_for_a_fail() -> None:
    assert episode_reward([_turn(True, 1.0)]) == 1.0
    assert episode_reward([_turn(False, 0.5), _turn(True, 1.0)]) == 0.9
    assert episode_reward([_turn(False, 0.0), _turn(False, 0.5)]) == 0.25
    assert episode_reward([]) == 0.0


def test_turn_credit_judges_each_turn_by_its_own_verdict() -> None:
    wrong, fixed = _turn(False, 0.5), _turn(True, 1.0)
    # The wrong first attempt keeps its own partial score, not the 0.9 its revision earned.
    assert turn_reward(wrong, 0) == 0.25
    assert turn_reward(fixed, 1) == 0.9
    # The last turn's reward is the episode's, whatever the credit.
    for turns in ([fixed], [wrong, fixed], [wrong, _turn(False, 0.0)]):
        assert turn_reward(turns[-1], len(turns) - 1) == episode_reward(turns)


def test_without_partial_credit_every_failure_scores_zero() -> None:
    wrong = _turn(False, 0.75)
    assert turn_reward(wrong, 0, partial=0.0) == 0.0
    assert episode_reward([wrong, _turn(True, 1.0)], partial=0.0) == 0.9
    assert episode_reward([_turn(False, 0.5), wrong], partial=0.0) == 0.0


def test_a_revision_that_passed_is_relabelled_as_the_first_prompts_answer() -> None:
    verdict = Verdict(passed=True, score=1.0)
    first = _turn(False, 0.0)
    fixed = EpisodeTurn([1, 9, 9], Sample([5, 6], [-0.3, -0.2], [4, 5]), "y", verdict, 0.1, 0.1)
    sample = relabelled_sample("g/0", [first, fixed])
    assert sample is not None
    assert sample.rollout_id == "g/0#h"
    assert sample.prompt == first.prompt  # the task as first asked, not the revision prompt
    assert sample.completion == [5, 6]
    assert sample.versions == [4, 5]  # the staleness bound still sees the tokens' versions
    assert sample.reward == 1.0
    assert sample.relabelled
    assert relabelled_sample("g/1", [fixed]) is None  # a first-attempt pass is trained as is
    assert relabelled_sample("g/2", [first, _turn(False, 0.5)]) is None


def test_revision_prompt_shows_the_attempt_and_the_failure_under_the_task() -> None:
    source = TaskSource(TasksConfig(levels=[1], demo_levels=[1], heldout_per_level=1))
    task, _ = source.train_task(1, 0)
    verdict = Verdict(passed=False, score=0.0, failure="agent", reason="test_0: failed got 3")
    prompt = revision_prompt(task, "    return x + 2\n", verdict)
    assert prompt.startswith(task.prompt)
    assert "# tried: return x + 2" in prompt
    assert "# failed: test_0: failed got 3" in prompt
    # An annotated attempt is shown by its code: its comments only restate the prompt.
    annotated = "    # Add 3.\n    x = x + 2\n    return x\n"
    assert "# tried: x = x + 2 return x\n" in revision_prompt(task, annotated, verdict)


def test_long_prompts_are_cut_from_the_left_to_fit() -> None:
    tokenizer = ByteTokenizer()
    ids = encode_prompt(tokenizer, "a" * 100 + "END", 10)
    assert len(ids) == 10
    assert ids[0] == tokenizer.bos
    assert tokenizer.decode(ids).endswith("END")


def test_a_prompt_room_of_one_keeps_only_the_start_token() -> None:
    # max_new_tokens = max_len - 1 (the config allows it) leaves room 1: the cut was
    # ids[-0:], the whole prompt, which the generator then refused.
    tokenizer = ByteTokenizer()
    assert encode_prompt(tokenizer, "def f(x):", 1) == [tokenizer.bos]
    assert encode_prompt(tokenizer, "def f(x):", 0) == [tokenizer.bos]
    assert encode_prompt(tokenizer, "def f(x):", 2) == [tokenizer.bos, ord(":")]
    assert encode_prompt(tokenizer, "ab", 10) == tokenizer.encode("ab")


def test_heldout_tasks_are_never_training_tasks() -> None:
    source = TaskSource(
        TasksConfig(levels=[1, 2], demo_levels=[1], heldout_per_level=10, demos_per_level=5)
    )
    heldout_bodies = {t.canonical_solution for t in source.heldout()}
    index = 0
    for _ in range(300):
        task, index = source.train_task(1 + index % 2, index)
        assert task.canonical_solution not in heldout_bodies
    assert all(prompt.startswith("def f(") for prompt, _ in source.demos()[:5])
    assert {t.level for t in source.heldout()} == {1, 2}


def test_report_refuses_a_directory_that_is_not_a_run(tmp_path: Path) -> None:
    result = CliRunner().invoke(cli, ["report", str(tmp_path)])
    assert result.exit_code == 1
    assert "not a roost train run directory" in result.output


def test_sync_book_closes_admission_while_the_learner_steps() -> None:
    from roost.train.book import TrainBook

    book = TrainBook(0, 4)
    assert book.admits(0)
    assert book.may_step(0)
    assert not book.admits(0), "a rollout starting now would reach the learner one version late"
    book.version = 1  # published
    assert book.admits(0)
    asynchronous = TrainBook(2, 4)
    assert asynchronous.may_step(0)
    assert asynchronous.admits(0)


def test_weights_of_the_old_position_table_model_get_an_error_that_says_so(
    tmp_path: Path,
) -> None:
    policy = make_policy(ModelConfig(d_model=32, n_layers=1, n_heads=2, max_len=128), seed=0)
    old = tmp_path / "old.pt"
    state = dict(policy.state_dict())
    state["pos.weight"] = torch.zeros(128, 32)
    torch.save({"model": state, "version": 3}, old)
    with pytest.raises(ValueError, match="rotary positions"):
        load_weights(policy, old)
    current = tmp_path / "current.pt"
    save_weights(policy, current)
    load_weights(policy, current, version=4)
    assert policy.version == 4


def test_demonstrations_the_model_could_never_finish_are_named_in_a_warning() -> None:
    config = TasksConfig(
        levels=[1, 2], demo_levels=[1, 2], demos_per_level=50, solution_style="annotated"
    )
    annotated = TaskSource(config)
    pairs = annotated.demos()
    longest = max(len(answer.encode()) for _, answer in pairs)
    with structlog.testing.capture_logs() as logs:
        _warn_if_answers_cut(pairs, longest + 1)  # room for the longest and its end token
    assert logs == []
    with structlog.testing.capture_logs() as logs:
        _warn_if_answers_cut(pairs, 64)
    (warning,) = logs
    assert warning["event"] == "demonstrations_longer_than_max_new_tokens"
    assert warning["longest_bytes"] == longest > 64
    assert warning["count"] > 0
