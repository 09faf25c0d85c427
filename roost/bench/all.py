"""`roost bench all`: every benchmark suite, one after the other, into one JSON document.

The suites run in the order of `SUITES`, each in its own event loop, with the same `quick` and
`repeats`. A suite whose module is not in this checkout is reported under `missing` (and in its
own entry), never skipped silently; a suite that raises is reported under `errors` with the
exception, and the others still run. Each entry carries the suite's result, how long it took,
and its targets with their verdicts.
"""

from __future__ import annotations

import importlib
import time
import traceback
from collections.abc import Callable, Sequence
from types import ModuleType
from typing import Any

from roost.bench._report import machine
from roost.bench.targets import targets_of, verdicts

__all__ = ["SUITES", "run"]

#: Suite name (as in `roost bench NAME`) -> the module that runs it.
SUITES: dict[str, str] = {
    "runtime": "roost.bench.runtime",
    "sandbox": "roost.bench.sandbox",
    "generation": "roost.bench.generation",
    "async": "roost.bench.asynchrony",
    "scale": "roost.bench.scale",
}


def load_suite(name: str) -> ModuleType | None:
    """The suite's module, or None when this checkout does not have it.

    :raises ModuleNotFoundError: the module exists but one of its own imports is missing.
    """
    module_name = SUITES[name]
    try:
        return importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name == module_name:
            return None
        raise


def run(
    *,
    quick: bool = False,
    repeats: int | None = None,
    suites: Sequence[str] | None = None,
    on_suite: Callable[[str, dict[str, Any]], None] | None = None,
) -> dict[str, Any]:
    """Run `suites` (default: all); returns the whole document. `on_suite(name, entry)`
    follows progress.

    :raises ValueError: an unknown suite name.
    """
    suites = list(SUITES) if suites is None else list(suites)
    unknown = [name for name in suites if name not in SUITES]
    if unknown:
        raise ValueError(f"unknown suites {unknown}; known: {', '.join(SUITES)}")
    document: dict[str, Any] = {
        "suite": "all",
        "machine": machine(),
        "quick": quick,
        "repeats": repeats,
        "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "suites": {},
        "missing": [],
        "errors": [],
    }
    for name in suites:
        entry = _run_suite(name, quick=quick, repeats=repeats)
        if "missing" in entry:
            document["missing"].append(name)
        if "error" in entry:
            document["errors"].append(name)
        document["suites"][name] = entry
        if on_suite is not None:
            on_suite(name, entry)
    document["targets"] = [
        {"suite": name, **line}
        for name, entry in document["suites"].items()
        for line in entry.get("targets", [])
    ]
    return document


def _run_suite(name: str, *, quick: bool, repeats: int | None) -> dict[str, Any]:
    started = time.perf_counter()
    try:
        module = load_suite(name)
        if module is None:
            return {"missing": f"{SUITES[name]} is not in this checkout"}
        result: dict[str, Any] = module.run(quick=quick, repeats=repeats)
    except Exception as exc:  # one broken suite must not cost the figures of the others
        return {
            "error": f"{type(exc).__name__}: {exc}",
            "traceback": traceback.format_exc(),
            "seconds": time.perf_counter() - started,
        }
    return {
        "seconds": time.perf_counter() - started,
        "result": result,
        "targets": verdicts(targets_of(name, module), result),
    }
