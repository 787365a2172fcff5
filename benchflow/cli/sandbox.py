"""`benchflow sandbox ...`: manage sandboxes left by crashed runs."""

from __future__ import annotations

from typing import Annotated

import anyio
import typer

from benchflow.cli._common import console, user_errors
from benchflow.sandbox.registry import get_provider

app = typer.Typer(help="Manage sandboxes.", no_args_is_help=True)


@app.command("cleanup")
def cleanup(job: Annotated[str | None, typer.Option("--job", help="only this job's")] = None,
            env: Annotated[str, typer.Option("--env", help="sandbox backend")] = "docker") -> None:
    """Remove every sandbox (and model-only network) benchflow created on a backend (or one job's)."""
    with user_errors():
        provider = get_provider(env)

        async def _all() -> tuple[list[str], list[str]]:
            await provider.preflight()
            return await provider.cleanup(job), await provider.cleanup_extras(job)

        removed, extras = anyio.run(_all)
    console.print(f"removed {len(removed)} sandbox(es)" + (f": {', '.join(removed)}" if removed else ""))
    if extras:
        console.print(f"removed {len(extras)} other leftover(s): {', '.join(extras)}")
