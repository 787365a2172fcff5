"""`benchflow sandbox ...`: manage sandboxes left by crashed runs."""

from __future__ import annotations

from typing import Annotated

import anyio
import typer

from benchflow.cli._common import console, user_errors
from benchflow.sandbox.cleanup import cleanup_all

app = typer.Typer(help="Manage sandboxes.", no_args_is_help=True)


@app.command("cleanup")
def cleanup(job: Annotated[str | None, typer.Option("--job", help="only this job's")] = None) -> None:
    """Remove every container and model-only network benchflow created (or one job's)."""
    with user_errors():
        removed, networks = anyio.run(cleanup_all, job)
    console.print(f"removed {len(removed)} container(s)" + (f": {', '.join(removed)}" if removed else ""))
    if networks:
        console.print(f"removed {len(networks)} network(s): {', '.join(networks)}")
