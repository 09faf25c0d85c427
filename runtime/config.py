"""Typed configuration: embedded defaults, a TOML file over them, `--set a.b=value` over both.

    config = load_config(ExperimentConfig, path="exp.toml", overrides=["learner.lr=3e-4"])

The result is validated by msgspec against the config type; an error names the key path in
dotted form and what was expected (``learner.lr: Expected `float`, got `str```). `dump_config`
writes the resolved configuration back as TOML, so a run directory records exactly what ran.
"""

from __future__ import annotations

import os
import tomllib
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, TypeVar

import msgspec
import tomli_w

__all__ = ["ConfigError", "apply_override", "dump_config", "load_config"]

T = TypeVar("T")


class ConfigError(ValueError):
    """A configuration that cannot be used; the message names the source and the key path."""


def load_config(
    cls: type[T],
    *,
    path: str | os.PathLike[str] | None = None,
    overrides: Iterable[str] = (),
    base: Mapping[str, Any] | None = None,
) -> T:
    """The config: `cls()` defaults, then `base`, then the file at `path`, then `overrides`.

    :raises ConfigError: unreadable or invalid TOML (with line), a bad override, or a value of
        the wrong type or out of range (with its dotted key path).
    """
    data: dict[str, Any] = msgspec.to_builtins(cls())
    if base is not None:
        # A copy: merging stores its tables by reference, and the file and overrides then
        # write into them, which would change the caller's `base` for its next load.
        _merge(data, _plain(base))
    source = "defaults"
    if path is not None:
        source = str(path)
        _merge(data, _read_toml(path))
    for override in overrides:
        apply_override(data, override)
        source = f"{source} + --set"
    try:
        return msgspec.convert(data, cls)
    except msgspec.ValidationError as exc:
        raise ConfigError(f"{source}: {_dotted(str(exc))}") from None


def apply_override(data: dict[str, Any], override: str) -> None:
    """Set `a.b.c=value` in `data`; the value is read as TOML (3e-4, true, "x", [1, 2]), and
    anything that is not valid TOML as a plain string (so `policy=fifo` works unquoted).

    :raises ConfigError: no `=`, or an empty key.
    """
    key, sep, raw = override.partition("=")
    keys = [part.strip() for part in key.split(".")]
    if not sep or not all(keys):
        raise ConfigError(f"--set {override!r}: expected KEY.PATH=VALUE, for example lr=3e-4")
    try:
        value = tomllib.loads(f"v = {raw.strip()}")["v"]
    except (tomllib.TOMLDecodeError, RecursionError):
        # RecursionError: tomllib recurses per nesting level (`[[[[...`); still just a string.
        value = raw.strip()
    node = data
    for part in keys[:-1]:
        child = node.setdefault(part, {})
        if not isinstance(child, dict):
            raise ConfigError(f"--set {override!r}: {part!r} is a value, not a table")
        node = child
    node[keys[-1]] = value


def dump_config(config: Any) -> str:
    """The config as TOML text (None values, which TOML cannot hold, are left out)."""
    return tomli_w.dumps(_drop_none(msgspec.to_builtins(config)))


def _read_toml(path: str | os.PathLike[str]) -> dict[str, Any]:
    """The TOML document at `path`. Every way a file can be bad is a `ConfigError` naming it:
    not only OSError and TOML syntax, but bytes that are not UTF-8, a NUL byte in the path
    (ValueError from `open`) and nesting deep enough to exhaust tomllib's recursion."""
    try:
        return tomllib.loads(Path(path).read_text(encoding="utf-8"))
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read: {exc.strerror}") from None
    except UnicodeDecodeError as exc:
        raise ConfigError(
            f"{path}: not UTF-8 text: byte {exc.start} is {exc.object[exc.start]:#04x}"
        ) from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: not valid TOML: {exc}") from None
    except RecursionError:
        raise ConfigError(f"{path}: not valid TOML: arrays or tables nested too deeply") from None
    except ValueError as exc:  # a NUL byte in the path
        raise ConfigError(f"{path!r}: cannot read: {exc}") from None


def _merge(into: dict[str, Any], update: Mapping[str, Any]) -> None:
    for key, value in update.items():
        if isinstance(value, Mapping) and isinstance(into.get(key), dict):
            _merge(into[key], value)
        else:
            into[key] = value


def _plain(value: Any) -> Any:
    """A deep copy of `value` with every mapping a dict (so overrides can descend into it)."""
    if isinstance(value, Mapping):
        return {key: _plain(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_plain(item) for item in value]
    return value


def _drop_none(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _drop_none(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_drop_none(v) for v in value]
    return value


def _dotted(message: str) -> str:
    # msgspec says "... - at `$.learner.lr`"; researchers type `learner.lr`.
    head, sep, where = message.rpartition(" - at `$.")
    if not sep:
        return message
    return f"{where.rstrip('`')}: {head}"
