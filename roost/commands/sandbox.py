"""`roost sandbox ...`: run one command in a sandbox, check isolation, build the images.

`run` prints one ExecResult as JSON. stdout and stderr are decoded as UTF-8 text; when the bytes
are not valid UTF-8 the text has U+FFFD replacements and `stdout_b64`/`stderr_b64` carry the exact
bytes. Exit status: 0 whenever the sandbox ran (whatever the command's own exit code), 2 for bad
arguments, 3 when the sandbox could not run (one line on stderr says why).
"""

from __future__ import annotations

import base64
import json
import sys
from pathlib import Path
from typing import Any

import anyio
import click
from rich.console import Console
from rich.table import Table

from sandboxes import (
    BACKENDS,
    RUNTIMES,
    ExecResult,
    SandboxConfigError,
    SandboxError,
    SandboxSpec,
    create_sandbox,
    load_spec,
)

INFRA_EXIT = 3
LOG_LEVELS = ("debug", "info", "warning", "error", "critical")
_REAL_BACKENDS = [b for b in BACKENDS if b != "sim"]


@click.group()
@click.option(
    "--log-level",
    # A name logging does not know was a KeyError traceback out of configure_logging.
    type=click.Choice(LOG_LEVELS, case_sensitive=False),
    default="warning",
    show_default=True,
    help="Log level (stderr).",
)
def sandbox(log_level: str) -> None:
    """Sandboxes: run a command, check isolation, build images (see docs/sandboxes.md)."""
    from runtime.logs import configure_logging

    # Logs go to stderr so that stdout stays one JSON document (`run`) or the table (`check`).
    configure_logging(level=log_level)


def result_to_json(result: ExecResult) -> dict[str, Any]:
    """The CLI's JSON form of an ExecResult (text output, exact bytes in base64 when needed)."""
    out: dict[str, Any] = {
        "exit_code": result.exit_code,
        "timed_out": result.timed_out,
        "oom_killed": result.oom_killed,
        "signal": result.signal,
        "duration_s": round(result.duration_s, 6),
        "infra_error": (
            {"kind": result.infra_error.kind, "message": result.infra_error.message}
            if result.infra_error
            else None
        ),
    }
    for name in ("stdout", "stderr"):
        data: bytes = getattr(result, name)
        try:
            out[name] = data.decode("utf-8")
        except UnicodeDecodeError:
            out[name] = data.decode("utf-8", errors="replace")
            out[f"{name}_b64"] = base64.b64encode(data).decode("ascii")
        out[f"{name}_truncated"] = getattr(result, f"{name}_truncated")
    return out


def _fail(message: str) -> None:
    first_line = message.strip().splitlines()[0] if message.strip() else "unknown error"
    click.echo(f"roost sandbox: error: {first_line}", err=True)
    sys.exit(INFRA_EXIT)


def _spec_from_options(backend: str, runtime: str, **limits: Any) -> SandboxSpec:
    data = {"backend": backend, "runtime": runtime}
    data.update({k: v for k, v in limits.items() if v is not None})
    try:
        return load_spec(data)
    except SandboxConfigError as exc:
        raise click.BadParameter(str(exc)) from None


async def _with_reaper(backend: str, body: Any) -> Any:
    """Run `body()`; around docker-based runs, reap expired leftovers first and this run's last."""
    if backend not in ("docker", "gvisor"):
        return await body()
    import aiodocker

    from sandboxes import RUN_ID, reap

    async def sweep(**kw: Any) -> None:
        docker = aiodocker.Docker()
        try:
            await reap(docker, **kw)
        except SandboxError:
            pass  # the run itself will say what is wrong with the daemon
        finally:
            await docker.close()

    await sweep(expired=True)
    try:
        return await body()
    finally:
        with anyio.CancelScope(shield=True):
            await sweep(run_id=RUN_ID, expired=False)


@sandbox.command("run", context_settings={"ignore_unknown_options": True})
@click.option("--backend", type=click.Choice(_REAL_BACKENDS), default="process", show_default=True)
@click.option(
    "--runtime",
    # The process backend ignored a runtime it did not know instead of refusing it.
    type=click.Choice(sorted(RUNTIMES)),
    default="python",
    show_default=True,
)
@click.option("--memory", help="Memory limit, e.g. 256m.")
@click.option("--pids", type=int, help="Process limit.")
@click.option("--cpus", type=float, help="CPU quota in cores.")
@click.option("--disk", help="Work directory size, e.g. 64m.")
@click.option("--timeout", "timeout_s", type=float, help="Seconds before the command is killed.")
@click.option("--stdin-file", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.argument("cmd", nargs=-1, required=True, type=click.UNPROCESSED)
def run(
    backend: str, runtime: str, stdin_file: Path | None, cmd: tuple[str, ...], **limits: Any
) -> None:
    """Run CMD (after `--`) in a fresh sandbox and print its ExecResult as JSON."""
    spec = _spec_from_options(backend, runtime, **limits)
    stdin = stdin_file.read_bytes() if stdin_file is not None else None

    async def body() -> ExecResult:
        async with create_sandbox(spec) as sb:
            return await sb.exec(list(cmd), stdin=stdin)

    try:
        result = anyio.run(_with_reaper, backend, body)
    except SandboxConfigError as exc:
        raise click.BadParameter(str(exc)) from None
    except SandboxError as exc:
        _fail(str(exc))
        return
    click.echo(json.dumps(result_to_json(result)))
    if result.infra_error is not None:
        _fail(result.infra_error.message)


@sandbox.command("check")
@click.option("--backend", type=click.Choice(_REAL_BACKENDS), required=True)
@click.option(
    "--runtime",
    # The process backend ignored a runtime it did not know instead of refusing it.
    type=click.Choice(sorted(RUNTIMES)),
    default="python",
    show_default=True,
)
@click.option("--json", "as_json", is_flag=True, help="Print JSON lines instead of a table.")
def check(backend: str, runtime: str, as_json: bool) -> None:
    """Run the isolation suite against BACKEND and print a pass/fail table.

    Exits 0 when every check passes or is weaker by design (documented), 1 otherwise.
    """
    from sandboxes.checks import run_isolation_suite

    spec = _spec_from_options(backend, runtime)
    outcomes = anyio.run(_with_reaper, backend, lambda: run_isolation_suite(spec))
    if as_json:
        for o in outcomes:
            click.echo(json.dumps({"check": o.name, "status": o.status, "detail": o.detail}))
    else:
        table = Table(title=f"roost sandbox check --backend {backend}")
        table.add_column("check")
        table.add_column("result")
        table.add_column("detail")
        table.add_column("s", justify="right")
        colour = {"pass": "green", "weaker": "yellow", "fail": "red"}
        for o in outcomes:
            status = f"[{colour[o.status]}]{o.status}[/]"
            table.add_row(o.name, status, o.detail, f"{o.seconds:.1f}")
        Console().print(table)
    if any(o.status == "fail" for o in outcomes):
        sys.exit(1)


@sandbox.command("images")
@click.option("--force", is_flag=True, help="Rebuild even when the tags exist.")
def images(force: bool) -> None:
    """Build or refresh the sandbox images (idempotent: cached by content hash)."""
    import aiodocker

    from sandboxes import ImageReport, build_images

    def show(report: ImageReport) -> None:
        click.echo(f"{report.action:6} {report.name} ({report.seconds:.1f}s)")

    async def body() -> None:
        docker = aiodocker.Docker()
        try:
            await build_images(docker, force=force, on_report=show)
        finally:
            await docker.close()

    try:
        anyio.run(body)
    except SandboxError as exc:
        _fail(str(exc))
