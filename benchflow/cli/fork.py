"""`benchflow fork`: run a finished rollout again from a turn, with other agents in roles."""

from pathlib import Path
from typing import Annotated

import typer

from benchflow.cli._common import EXIT_ROLLOUT_ERROR, console, user_errors


def fork_command(
    rollout_dir: Annotated[Path, typer.Argument(
        help="a finished rollout run with --snapshot-turns: "
             "<jobs>/<job>/<agent>/<dataset>/<task>__<n>")],
    at_turn: Annotated[int, typer.Option(
        "--at-turn", help="the first turn run again (turns before it are the shared "
        "history)")],
    role: Annotated[list[str] | None, typer.Option(
        "--role", help="NAME=AGENT[:MODEL]: who plays a role from the fork on "
        "(repeatable); roles not given keep their agent")] = None,
    jobs_dir: Annotated[Path | None, typer.Option(
        "--jobs-dir", help="where the fork's job goes (default: the original's)")] = None,
    job_name: Annotated[str | None, typer.Option(
        "--job-name", help="the fork's job (default: fork-<job>-t<N>-<time>)")] = None,
    k: Annotated[int, typer.Option("-k", help="how many forks to run")] = 1,
    snapshot_turns: Annotated[bool, typer.Option(
        "--snapshot-turns", help="snapshot the forks' turns too (to fork them again)")] = False,
) -> None:
    """Fork a finished rollout at a turn: its sandbox restored from the snapshot before
    --at-turn, the turns from there run again (with --role agents), verified, and written
    as a new rollout whose result.json names its parent."""
    import anyio

    from benchflow.roles import parse_role_options
    from benchflow.job.job import run_fork
    from benchflow.rollout.fork import plan_fork

    with user_errors():
        roles = parse_role_options(role or [])
        plan = anyio.run(lambda: plan_fork(rollout_dir, at_turn, roles, jobs_dir=jobs_dir,
                                           job_name=job_name, k=k,
                                           snapshot_turns=snapshot_turns))
    results = anyio.run(lambda: run_fork(plan))
    for result in results:
        score = (f"reward {result.reward}" if result.error is None
                 else f"error {result.error.type}: {result.error.message[:200]}")
        console.print(f"{plan.job_name}/{result.rollout_name}: {score}", highlight=False)
    console.print(f"forked {plan.original.job_name}/{plan.original.rollout_name} at turn "
                  f"{plan.configs[0].fork.step if plan.configs[0].fork else at_turn} -> "
                  f"{plan.jobs_dir / plan.job_name}", highlight=False)
    if any(r.error is not None for r in results):
        raise typer.Exit(EXIT_ROLLOUT_ERROR)
