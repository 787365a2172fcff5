"""`benchflow export`: a job's rollouts as training data (sft, sharegpt, atif JSONL)."""

from pathlib import Path
from typing import Annotated

import typer

from benchflow.cli._common import console, user_errors
from benchflow.errors import ConfigError


def export_command(
    job_dir: Annotated[Path, typer.Argument(help="the job folder, e.g. jobs/<job-name>")],
    fmt: Annotated[str, typer.Option("--format", "-f", help="sft | sharegpt | atif")] = "sft",
    out: Annotated[Path, typer.Option("-o", "--output", help="the JSONL file to write")] = Path(
        "export.jsonl"),
    min_reward: Annotated[float | None, typer.Option(
        "--min-reward", help="keep rollouts whose reward is at least this")] = None,
    agent: Annotated[list[str] | None, typer.Option("--agent", help="keep these agents")] = None,
    role: Annotated[list[str] | None, typer.Option("--role", help="keep these roles")] = None,
    dataset: Annotated[list[str] | None, typer.Option(
        "--dataset", help="keep these datasets")] = None,
    errors: Annotated[str, typer.Option(
        "--errors", help="include | exclude rollouts that ended with an error")] = "exclude",
    workspace_changes: Annotated[bool, typer.Option(
        "--workspace-changes", help="add each turn's workspace changes (files, diffs) to "
        "the metadata of its role's line")] = False,
    source: Annotated[str, typer.Option(
        "--from", help="trajectory (what the agent reported) | model-calls (what the model "
        "saw: needs a run with --capture-model-calls)")] = "trajectory",
) -> None:
    """Export a job's rollouts as training data: one JSONL line per rollout and role."""
    from benchflow.job.export import ExportFilters, export_job

    with user_errors():
        if errors not in ("include", "exclude"):
            raise ConfigError(f"--errors {errors!r}: choose include or exclude")
        if source not in ("trajectory", "model-calls"):
            raise ConfigError(f"--from {source!r}: choose trajectory or model-calls")
        filters = ExportFilters(min_reward=min_reward, agents=tuple(agent or ()),
                                datasets=tuple(dataset or ()), roles=tuple(role or ()),
                                errors=errors,  # type: ignore[arg-type]
                                workspace_changes=workspace_changes)
        stats = export_job(job_dir, fmt, out, filters, source)  # type: ignore[arg-type]
    console.print(f"wrote {stats.lines} lines from {stats.rollouts} rollouts to {out} "
                  f"({stats.skipped_rollouts} rollouts filtered out)")
