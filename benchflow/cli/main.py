"""The `benchflow` command line."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from benchflow import __version__
from benchflow.cli import agents, datasets, jobs, sandbox, tasks
from benchflow.cli._common import configure_logging
from benchflow.cli.export import export_command
from benchflow.cli.model_server import model_server_command
from benchflow.cli.run import run_command
from benchflow.cli.view import view_command

app = typer.Typer(
    name="benchflow", no_args_is_help=True, pretty_exceptions_enable=False,
    help="Run AI coding agents on containerized tasks, score them, keep their trajectories.",
)
app.command("run")(run_command)
app.command("model-server")(model_server_command)
app.command("view")(view_command)
app.command("export")(export_command)
app.add_typer(tasks.app, name="tasks")
app.add_typer(sandbox.app, name="sandbox")
app.add_typer(jobs.app, name="jobs")
app.add_typer(agents.app, name="agents")
app.add_typer(datasets.app, name="datasets")


def _version(value: bool) -> None:
    if value:
        typer.echo(f"benchflow {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: Annotated[bool, typer.Option("--version", callback=_version, is_eager=True,
                                          help="print the version and exit")] = False,
    log_level: Annotated[str, typer.Option("--log-level", help="debug|info|warning|error")] = "warning",
) -> None:
    configure_logging(log_level)


def main() -> None:
    """Console-script entry point; `benchflow job.yaml ...` means `benchflow jobs run job.yaml ...`."""
    args = sys.argv[1:]
    if args and args[0].endswith((".yaml", ".yml", ".json")) and Path(args[0]).is_file():
        sys.argv[1:1] = ["jobs", "run"]
    app()
