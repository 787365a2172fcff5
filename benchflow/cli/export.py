"""`benchflow export`: a job's rollouts as training data (sft, sharegpt, atif, adp JSONL;
token samples as JSONL or Parquet)."""

from pathlib import Path
from typing import Annotated

import typer

from benchflow.cli._common import console, user_errors
from benchflow.errors import ConfigError


def export_command(
    job_dir: Annotated[Path, typer.Argument(help="the job folder, e.g. jobs/<job-name>")],
    fmt: Annotated[str, typer.Option(
        "--format", "-f", help="sft | sharegpt | atif | adp | tokens (token ids, loss mask and "
        "logprobs of captured calls: needs a run with --capture-tokens)")] = "sft",
    out: Annotated[Path, typer.Option(
        "-o", "--output", help="the file to write: JSONL, or Parquet (.parquet) for "
        "tokens")] = Path("export.jsonl"),
    min_reward: Annotated[float | None, typer.Option(
        "--min-reward", help="keep rollouts whose reward is at least this")] = None,
    agent: Annotated[list[str] | None, typer.Option(
        "--agent", help="keep the roles played by these agents")] = None,
    model: Annotated[list[str] | None, typer.Option(
        "--model", help="keep the roles that used these models")] = None,
    role: Annotated[list[str] | None, typer.Option(
        "--role", help="keep these roles (tokens: the trainable roles)")] = None,
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
    include_trace: Annotated[bool, typer.Option(
        "--include-trace", help="add each rollout's agent trace (trace_events.jsonl, from "
        "the tracing SDK) to its lines as `trace_events`")] = False,
) -> None:
    """Export a job's rollouts as training data: one line per rollout and role.

    Each line's metadata names its role's own agent and model; --agent, --model and
    --role keep only matching roles (a claude coder's lines out of a claude + codex run)."""
    from benchflow.job.export import ExportFilters, export_job, skip_summary

    with user_errors():
        if errors not in ("include", "exclude"):
            raise ConfigError(f"--errors {errors!r}: choose include or exclude")
        if source not in ("trajectory", "model-calls"):
            raise ConfigError(f"--from {source!r}: choose trajectory or model-calls")
        filters = ExportFilters(min_reward=min_reward, agents=tuple(agent or ()),
                                models=tuple(model or ()), datasets=tuple(dataset or ()),
                                roles=tuple(role or ()), errors=errors,  # type: ignore[arg-type]
                                workspace_changes=workspace_changes)
        stats = export_job(job_dir, fmt, out, filters, source,  # type: ignore[arg-type]
                           include_trace=include_trace)
    skipped = f"; skipped {skip_summary(stats)}" if stats.skipped_samples else ""
    console.print(f"wrote {stats.lines} lines from {stats.rollouts} rollouts to {out} "
                  f"({stats.skipped_rollouts} rollouts filtered out{skipped})")
    calls_skipped = stats.skipped_summary()
    if calls_skipped:
        console.print(calls_skipped)
