"""`benchflow sandbox ...`: manage sandboxes left by crashed runs."""

import json
from pathlib import Path
from typing import Annotated, Any

import anyio
import typer

from benchflow.cli._common import console, user_errors
from benchflow.errors import ConfigError
from benchflow.job.config import load_job_config
from benchflow.job.store import CONFIG
from benchflow.sandbox import ledger
from benchflow.sandbox.owner import CleanupReport, CleanupScope, read_job_id
from benchflow.sandbox.registry import get_provider

app = typer.Typer(help="Manage sandboxes.", no_args_is_help=True)


@app.command("cleanup")
def cleanup(job: Annotated[str | None, typer.Option("--job", help="only this job's")] = None,
            all_: Annotated[bool, typer.Option(
                "--all", help="every sandbox benchflow made, live jobs' too (needs --force)")
            ] = False,
            force: Annotated[bool, typer.Option(
                "--force", help="also remove sandboxes whose owning process still runs")
            ] = False,
            env: Annotated[str | None, typer.Option(
                "--env", help="sandbox backend (default: --job's, else docker)")] = None,
            provider_config: Annotated[str | None, typer.Option(
                "--provider-config",
                help="the backend's provider_config as a JSON object (default: --job's)")] = None,
            jobs_dir: Annotated[Path, typer.Option(
                "--jobs-dir", help="where --job's folder (and its sandboxes.jsonl) is")] = Path("jobs"),
            ) -> None:
    """Remove the sandboxes (and model-only networks) that crashed runs left behind.

    Without options: only those whose owning process is gone (each sandbox carries a lease
    naming its host, process and start time, checked first); the rest are listed as kept.
    --job NAME: that job's (the instance in --jobs-dir, found by its id, and sandboxes of
    older versions by name), except those of a process still running it. --force also takes
    live ones; --all --force takes everything benchflow made.

    With --job, the backend and its provider_config default to the ones in the job
    folder's config.json, so a crashed cloud job is reclaimed with the settings it ran with.
    """
    with user_errors():
        if all_ and not force:
            raise ConfigError("--all also removes the sandboxes of jobs that are running now: "
                              "add --force to confirm, or leave --all out to remove leftovers "
                              "only")
        if all_ and job is not None:
            raise ConfigError("--all and --job exclude each other: give one")
        saved = _saved_environment(jobs_dir / job) if job is not None else None
        if env is None:
            env = saved[0] if saved else "docker"
        if provider_config is not None:
            settings = _parse_provider_config(provider_config)
        else:
            settings = saved[1] if saved and saved[0] == env else {}
        provider = get_provider(env, settings)
        scope = CleanupScope(job_id=read_job_id(jobs_dir / job) if job is not None else None,
                             job_name=job, force=force)

        async def _all() -> tuple[CleanupReport, CleanupReport]:
            await provider.preflight()
            report = await provider.sweep(scope)
            if job is not None:
                path = jobs_dir / job / ledger.LEDGER_NAME
                left = [i for i in ledger.unaccounted(path, provider.name)
                        if i not in report.removed and i not in dict(report.skipped)]
                report.removed += await provider.cleanup_ids(left)
            return report, await provider.sweep_extras(scope)

        report, extras = anyio.run(_all)
    removed = report.removed
    console.print(f"removed {len(removed)} sandbox(es)" + (f": {', '.join(removed)}" if removed else ""))
    if extras.removed:
        console.print(f"removed {len(extras.removed)} other leftover(s): {', '.join(extras.removed)}")
    kept = report.skipped + extras.skipped
    if kept:
        console.print(f"kept {len(kept)}:", highlight=False)
        for name, reason in kept:
            console.print(f"  {name}: {reason}", highlight=False)
        console.print("(--job NAME removes one job's, --all --force everything)", highlight=False)


def _saved_environment(job_dir: Path) -> tuple[str, dict[str, Any]] | None:
    """The backend and provider_config a job ran with, from its config.json (None when the
    folder has none: a job of `benchflow run` or a folder already removed)."""
    if not (job_dir / CONFIG).is_file():
        return None
    environment = load_job_config(job_dir / CONFIG).environment
    return environment.type, dict(environment.provider_config)


def _parse_provider_config(text: str) -> dict[str, Any]:
    try:
        value = json.loads(text)
    except ValueError as exc:
        raise ConfigError(f"--provider-config: not JSON ({exc}): give an object such as "
                          "'{\"app_name\": \"my-app\"}'") from None
    if not isinstance(value, dict):
        raise ConfigError("--provider-config: give a JSON object such as "
                          "'{\"app_name\": \"my-app\"}'")
    return value
