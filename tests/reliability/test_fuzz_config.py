"""Fuzzing the experiment config loader and the stress workload loader.

Whatever the bytes of the file or the text of a `--set`, the loader returns a valid config or
raises its own error type (`ConfigError`, `WorkloadError`) whose message names the file and,
for a bad value, the dotted key path. Nothing else escapes and nothing hangs.
"""

from __future__ import annotations

import tomllib
from pathlib import Path

import msgspec
import pytest
import tomli_w
from hypothesis import given
from hypothesis import strategies as st

from roost.stress.workload import Workload, WorkloadError, load_workload
from runtime.config import ConfigError, load_config
from tests.reliability.conftest import FUZZ

WORKLOADS = sorted((Path(__file__).parents[2] / "scripts" / "workloads").glob("*.toml"))


class Optimizer(msgspec.Struct, forbid_unknown_fields=True):
    lr: float = 1e-3
    betas: list[float] = msgspec.field(default_factory=lambda: [0.9, 0.99])

    def __post_init__(self) -> None:
        if not self.lr > 0:
            raise ValueError("lr must be > 0")


class Learner(msgspec.Struct, forbid_unknown_fields=True):
    batch: int = 8
    optimizer: Optimizer = msgspec.field(default_factory=Optimizer)


class Experiment(msgspec.Struct, forbid_unknown_fields=True):
    name: str = "default"
    seed: int = 0
    learner: Learner = msgspec.field(default_factory=Learner)
    tags: list[str] = msgspec.field(default_factory=list)


# (dotted key path, a value of the wrong type for it)
LEAVES = {
    "name": st.one_of(st.integers(), st.booleans(), st.lists(st.integers(), min_size=1)),
    "seed": st.one_of(st.text(max_size=5), st.floats(allow_nan=False), st.booleans()),
    "learner.batch": st.one_of(st.text(max_size=5), st.lists(st.integers(), max_size=2)),
    "learner.optimizer.lr": st.one_of(st.text(max_size=5), st.booleans()),
    "learner.optimizer.betas": st.one_of(st.integers(), st.text(max_size=3)),
    "tags": st.one_of(st.integers(), st.lists(st.integers(), min_size=1, max_size=3)),
}


def _nest(dotted: str, value: object) -> dict[str, object]:
    node: object = value
    for part in reversed(dotted.split(".")):
        node = {part: node}
    assert isinstance(node, dict)
    return node


@FUZZ
@given(data=st.binary(max_size=400))
def test_fuzz_config_file_of_random_bytes_loads_or_names_the_file(
    tmp_path_factory: pytest.TempPathFactory, data: bytes
) -> None:
    path = tmp_path_factory.mktemp("cfg") / "exp.toml"
    path.write_bytes(data)
    try:
        config = load_config(Experiment, path=path)
    except ConfigError as exc:
        error = str(exc)
    else:
        assert isinstance(config, Experiment)
        return
    assert str(path) in error


@FUZZ
@given(key=st.sampled_from(sorted(LEAVES)), data=st.data())
def test_fuzz_config_wrong_type_is_named_by_its_dotted_key_path(
    tmp_path_factory: pytest.TempPathFactory, key: str, data: st.DataObject
) -> None:
    value = data.draw(LEAVES[key])
    path = tmp_path_factory.mktemp("cfg") / "exp.toml"
    path.write_text(tomli_w.dumps(_nest(key, value)))
    with pytest.raises(ConfigError) as caught:
        load_config(Experiment, path=path)
    assert str(path) in str(caught.value)
    assert key in str(caught.value)


@FUZZ
@given(
    key=st.sampled_from([*sorted(LEAVES), "learner.nope", "nope"]),
    raw=st.text(max_size=60),
)
def test_fuzz_config_override_of_any_text_applies_or_names_the_override(key: str, raw: str) -> None:
    override = f"{key}={raw}"
    try:
        config = load_config(Experiment, overrides=[override])
    except ConfigError as exc:
        message = str(exc)
        assert "--set" in message
        # A bad value is named by its dotted path; an unknown key by its parent and its name.
        parent, _, last = key.rpartition(".")
        named = key in message or (parent in message and f"`{last}`" in message)
        assert named or repr(override)[:20] in message
    else:
        assert isinstance(config, Experiment)


@FUZZ
@given(
    key=st.text(max_size=30),
    raw=st.text(max_size=30),
)
def test_fuzz_config_override_with_any_key_text_never_escapes_config_error(
    key: str, raw: str
) -> None:
    try:
        load_config(Experiment, overrides=[f"{key}={raw}"])
    except ConfigError as exc:
        error = str(exc)
    else:
        return
    assert "--set" in error


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        (b"\xff\xfe name = 1", "not UTF-8"),
        (b"a = " + b"[" * 5000 + b"]" * 5000, "nested too deeply"),
        (b"a = " + b"{b=" * 3000 + b"1" + b"}" * 3000, "nested too deeply"),
        (b'name = "x"\nname = "y"\n', "line 2"),
        (b"learner = 3\n", "learner"),
        (b"[learner]\nbatch = 1\nbatchh = 2\n", "batchh"),
    ],
)
def test_fuzz_config_corpus_each_gets_a_clear_error(
    tmp_path: Path, content: bytes, expected: str
) -> None:
    path = tmp_path / "exp.toml"
    path.write_bytes(content)
    with pytest.raises(ConfigError, match=expected):
        load_config(Experiment, path=path)


def test_fuzz_config_unreadable_paths_are_config_errors(tmp_path: Path) -> None:
    for path, expected in [
        (tmp_path / "missing.toml", "cannot read"),
        (tmp_path, "cannot read"),  # a directory
        (f"{tmp_path}/a\0b.toml", "null byte"),
    ]:
        with pytest.raises(ConfigError, match=expected):
            load_config(Experiment, path=path)


# -- the stress workload file -------------------------------------------------------------------


def _mutations(text: str) -> st.SearchStrategy[str]:
    """`text` with a slice deleted, replaced or duplicated: near-valid files hit deep checks."""

    def mutate(args: tuple[int, int, str, int]) -> str:
        start, length, insert, kind = args
        start %= len(text) + 1
        end = min(len(text), start + length)
        if kind == 0:
            return text[:start] + text[end:]
        if kind == 1:
            return text[:start] + insert + text[end:]
        return text[:end] + text[start:end] + text[end:]

    return st.tuples(
        st.integers(0, 10_000),
        st.integers(0, 40),
        st.text(alphabet='[]{}=",.0123456789-abcdefgnrtu \n', max_size=12),
        st.integers(0, 2),
    ).map(mutate)


@FUZZ
@given(data=st.data())
def test_fuzz_workload_mutated_files_load_or_name_the_file(
    tmp_path_factory: pytest.TempPathFactory, data: st.DataObject
) -> None:
    source = data.draw(st.sampled_from(WORKLOADS))
    text = data.draw(_mutations(source.read_text()))
    path = tmp_path_factory.mktemp("wl") / "w.toml"
    path.write_text(text)
    try:
        workload = load_workload(path)
    except WorkloadError as exc:
        error = str(exc)
    else:
        assert isinstance(workload, Workload)
        return
    assert str(path) in error


@FUZZ
@given(
    section=st.sampled_from(["cluster", "generator", "faults", "scheduler", "groups"]),
    value=st.one_of(st.integers(), st.text(max_size=5), st.lists(st.integers(), max_size=2)),
)
def test_fuzz_workload_wrong_section_type_names_the_section(
    tmp_path_factory: pytest.TempPathFactory, section: str, value: object
) -> None:
    path = tmp_path_factory.mktemp("wl") / "w.toml"
    doc = tomllib.loads(WORKLOADS[0].read_text())
    doc[section] = value
    path.write_text(tomli_w.dumps(doc))
    with pytest.raises(WorkloadError) as caught:
        load_workload(path)
    message = str(caught.value)
    assert str(path) in message
    assert section in message or "groups" in message  # an empty list fails the groups check


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        (b"\x80name = 'x'", "not UTF-8"),
        (b"name = " + b"[" * 5000, "nested too deeply"),
        (b"name = 'x'\n[[groups]]\nname = 'g'\nsteps_to_pass = { dist = 'lognormal' }\n", "groups"),
    ],
)
def test_fuzz_workload_corpus_each_gets_a_clear_error(
    tmp_path: Path, content: bytes, expected: str
) -> None:
    path = tmp_path / "w.toml"
    path.write_bytes(content)
    with pytest.raises(WorkloadError, match=expected):
        load_workload(path)
