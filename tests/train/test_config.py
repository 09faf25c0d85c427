"""Every kind of config mistake is an error that names the key path and what was expected."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from roost.cli import cli
from roost.train.config import ConfigError, TrainConfig, load_train_config


def test_defaults_are_the_default_experiment() -> None:
    config = load_train_config()
    assert config == TrainConfig()
    assert config.learner.k == 2
    assert config.episode.max_turns == 3
    assert config.sandbox.backend == "process"
    assert config.sft.enabled
    assert config.scheduler.workers >= 200


def test_override_sets_a_nested_value() -> None:
    config = load_train_config(overrides=["learner.lr=3e-4", "tasks.levels=[1, 2]"])
    assert config.learner.lr == 3e-4
    assert config.tasks.levels == [1, 2]


@pytest.mark.parametrize(
    ("overrides", "expected"),
    [
        (["learner.lr=fast"], "learner.lr: Expected `float`, got `str`"),
        (["learner.lrr=1"], "learner: Object contains unknown field `lrr`"),
        (["learner.k=-1"], "learner: k: must be >= 0"),
        (["learner.warmup_steps=-1"], "learner: warmup_steps: must be >= 0"),
        (["learner.negative_weight=1.5"], "learner: negative_weight: must be in [0, 1]"),
        (["learner.average_decay=1"], "learner: average_decay: must be in [0, 1)"),
        (["learner.imitation_coef=-1"], "learner: imitation_coef: must be >= 0"),
        (["learner.imitation_batch=0"], "learner: imitation_batch: must be > 0"),
        (["learner.demo_coef=-0.5"], "learner: demo_coef: must be >= 0"),
        (["learner.demo_batch=0"], "learner: demo_batch: must be > 0"),
        (
            ["learner.demo_coef=1", "tasks.demo_levels=[]"],
            "learner.demo_coef: rehearsal needs demonstrations",
        ),
        (["learner.minibatches=0"], "learner: minibatches: must be > 0"),
        (["episode.partial_credit=2"], "episode: partial_credit: must be in [0, 1]"),
        (["episode.train_revisions=-0.5"], "episode: train_revisions: must be in [0, 1]"),
        (
            ["episode.partial_credit_in=mixed"],
            "episode.partial_credit_in: Invalid enum value 'mixed'",
        ),
        (["learner.baseline=episode"], "learner.baseline: Invalid enum value 'episode'"),
        (["learner.advantage_scale=max"], "learner.advantage_scale: Invalid enum value 'max'"),
        (["tasks.demo_levels=[5]"], "demo_levels: [5] must be among levels"),
        (["tasks.source=web"], "tasks.source: Invalid enum value 'web'"),
        (["tasks.solution_style=lines"], "tasks.solution_style: Invalid enum value 'lines'"),
        (["model.inference_dtype=half"], "model.inference_dtype: Invalid enum value 'half'"),
        (["episode.group_size=1"], "episode: group_size: GRPO needs at least 2"),
        (["model.d_model=100", "model.n_heads=3"], "d_model: 100 is not a multiple of n_heads"),
        (["nonsense"], "expected KEY.PATH=VALUE"),
        (["learner.k.x=1"], "'k' is a value, not a table"),
    ],
    ids=[
        "wrong-type",
        "unknown-key",
        "out-of-range",
        "negative-warmup",
        "weight-out-of-range",
        "decay-out-of-range",
        "negative-imitation",
        "empty-imitation-batch",
        "negative-rehearsal",
        "empty-rehearsal-batch",
        "rehearsal-without-demonstrations",
        "no-minibatches",
        "credit-out-of-range",
        "revision-share-out-of-range",
        "bad-credit-scope",
        "bad-baseline",
        "bad-advantage-scale",
        "cross-field",
        "bad-choice",
        "bad-solution-style",
        "bad-inference-dtype",
        "too-small-group",
        "shape",
        "override-syntax",
        "override-into-value",
    ],
)
def test_mistake_names_the_key_path(overrides: list[str], expected: str) -> None:
    with pytest.raises(ConfigError) as caught:
        load_train_config(overrides=overrides)
    assert expected in str(caught.value)


def test_invalid_toml_names_the_file_and_line(tmp_path: Path) -> None:
    path = tmp_path / "bad.toml"
    path.write_text("[learner]\nlr = = 3\n")
    with pytest.raises(ConfigError, match=r"bad.toml: not valid TOML.*line 2"):
        load_train_config(path)


def test_unknown_section_in_a_file_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "typo.toml"
    path.write_text("[lerner]\nlr = 1e-3\n")
    with pytest.raises(ConfigError, match="unknown field `lerner`"):
        load_train_config(path)


def test_jsonl_source_needs_a_path() -> None:
    with pytest.raises(ConfigError, match="tasks: path: a jsonl task source needs a path"):
        load_train_config(overrides=["tasks.source=jsonl"])


def test_cli_reports_a_config_error_without_a_traceback(tmp_path: Path) -> None:
    result = CliRunner().invoke(
        cli, ["train", "--set", "learner.batch_size=0", "--out", str(tmp_path / "run")]
    )
    assert result.exit_code == 2
    assert "learner: batch_size: must be > 0" in result.output
    assert not (tmp_path / "run").exists()


def test_cli_refuses_to_overwrite_a_run(tmp_path: Path) -> None:
    run = tmp_path / "run"
    run.mkdir()
    (run / "config.toml").write_text('name = "x"\n')
    result = CliRunner().invoke(cli, ["train", "--out", str(run)])
    assert result.exit_code == 2
    assert "--resume" in result.output


def test_examples_default_is_the_embedded_default() -> None:
    examples = Path(__file__).parents[2] / "examples"
    assert load_train_config(examples / "default.toml") == TrainConfig()


@pytest.mark.parametrize(
    "name", ["docker", "sync", "humaneval", "rl-beyond-demos", "rl-beyond-demos-gpu"]
)
def test_every_example_loads(name: str) -> None:
    examples = Path(__file__).parents[2] / "examples"
    config = load_train_config(examples / f"{name}.toml")
    assert config.name == name
