"""`benchflow sandbox ...`: manage sandboxes left by crashed runs."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import anyio
import typer

from benchflow.cli._common import console, user_errors
from benchflow.sandbox import ledger
from benchflow.sandbox.registry import get_provider

app = typer.Typer(help="Manage sandboxes.", no_args_is_help=True)


@app.command("cleanup")
def cleanup(job: Annotated[str | None, typer.Option("--job", help="only this job's")] = None,
            env: Annotated[str, typer.Option("--env", help="sandbox backend")] = "docker",
            jobs_dir: Annotated[Path, typer.Option(
                "--jobs-dir", help="where --job's folder (and its sandboxes.jsonl) is")] = Path("jobs"),
            ) -> None:
    """Remove every sandbox (and model-only network) benchflow created on a backend (or one
    job's: found by its labels and by the ids its sandboxes.jsonl never saw deleted)."""
    with user_errors():
        provider = get_provider(env)

        async def _all() -> tuple[list[str], list[str]]:
            await provider.preflight()
            removed = await provider.cleanup(job)
            if job is not None:
                path = jobs_dir / job / ledger.LEDGER_NAME
                left = [i for i in ledger.unaccounted(path, provider.name) if i not in removed]
                removed += await provider.cleanup_ids(left)
            return removed, await provider.cleanup_extras(job)

        removed, extras = anyio.run(_all)
    console.print(f"removed {len(removed)} sandbox(es)" + (f": {', '.join(removed)}" if removed else ""))
    if extras:
        console.print(f"removed {len(extras)} other leftover(s): {', '.join(extras)}")
