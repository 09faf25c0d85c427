"""Configuration: defaults, file, overrides, and errors that name the key path."""

from __future__ import annotations

import tomllib
from pathlib import Path

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

from runtime.config import ConfigError, apply_override, dump_config, load_config


class Learner(msgspec.Struct, forbid_unknown_fields=True):
    lr: float = 1e-3
    batch: int = 8

    def __post_init__(self) -> None:
        if self.lr <= 0:
            raise ValueError("lr must be > 0")


class Experiment(msgspec.Struct, forbid_unknown_fields=True):
    name: str = "default"
    policy: str = "fifo"
    learner: Learner = msgspec.field(default_factory=Learner)
    note: str | None = None


def test_defaults_then_file_then_overrides(tmp_path: Path) -> None:
    path = tmp_path / "exp.toml"
    path.write_text('name = "mine"\n[learner]\nbatch = 32\n')
    config = load_config(
        Experiment, path=path, overrides=["learner.lr=3e-4", "policy=runtime_affinity"]
    )
    assert config == Experiment(
        name="mine", policy="runtime_affinity", learner=Learner(lr=3e-4, batch=32)
    )


@pytest.mark.parametrize(
    ("text", "overrides", "message"),
    [
        ("[learner]\nlr = 'fast'", [], r"exp.toml: learner.lr: Expected `float`, got `str`"),
        ("[learner]\nlrr = 1.0", [], r"learner: Object contains unknown field `lrr`"),
        ("", ["learner.lr=-1"], r"learner: lr must be > 0"),
        ("", ["learner.batch=many"], r"learner.batch: Expected `int`, got `str`"),
        ("name = ", [], r"not valid TOML"),
        ("", ["noequals"], r"expected KEY.PATH=VALUE"),
        ("", ["name.x=1"], r"'name' is a value, not a table"),
    ],
)
def test_errors_name_the_key_path(
    tmp_path: Path, text: str, overrides: list[str], message: str
) -> None:
    path = tmp_path / "exp.toml"
    path.write_text(text)
    with pytest.raises(ConfigError, match=message):
        load_config(Experiment, path=path, overrides=overrides)


@given(lr=st.floats(min_value=1e-9, max_value=10.0), batch=st.integers(1, 10_000))
def test_dumped_config_loads_back_identically(lr: float, batch: int) -> None:
    config = Experiment(learner=Learner(lr=lr, batch=batch))
    data = tomllib.loads(dump_config(config))
    assert msgspec.convert(data, Experiment) == config


def test_unquoted_strings_are_accepted_in_overrides() -> None:
    data: dict[str, object] = {}
    apply_override(data, "a.b=fifo")
    apply_override(data, "a.c=[1, 2]")
    assert data == {"a": {"b": "fifo", "c": [1, 2]}}


class Sandbox(msgspec.Struct, forbid_unknown_fields=True):
    image: str = "python"
    cpus: int = 1


class Deployment(msgspec.Struct, forbid_unknown_fields=True):
    sandbox: Sandbox | None = None


def test_a_base_reused_for_several_loads_is_left_untouched(tmp_path: Path) -> None:
    base = {"sandbox": {"image": "ubuntu"}}
    path = tmp_path / "deploy.toml"
    path.write_text("[sandbox]\ncpus = 4\n")
    first = load_config(Deployment, base=base, path=path, overrides=["sandbox.image=alpine"])
    assert first.sandbox == Sandbox(image="alpine", cpus=4)
    assert base == {"sandbox": {"image": "ubuntu"}}
    assert load_config(Deployment, base=base).sandbox == Sandbox(image="ubuntu", cpus=1)
