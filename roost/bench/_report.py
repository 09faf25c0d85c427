"""Shared plumbing for benchmark suites: repetitions, medians, and the printed table."""

from __future__ import annotations

import os
import platform
import time
from typing import Any

from rich.console import Console
from rich.table import Table


def machine() -> dict[str, Any]:
    return {
        "python": platform.python_version(),
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
        "date": time.strftime("%Y-%m-%d"),
    }


def print_table(title: str, rows: list[tuple[str, str, str]], console: Console) -> None:
    table = Table(title=title)
    table.add_column("measure")
    table.add_column("value", justify="right")
    table.add_column("note")
    for row in rows:
        table.add_row(*row)
    console.print(table)
