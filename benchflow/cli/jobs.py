"""`benchflow jobs run|resume|summary|regrade|rm`: jobs from a job file (also `benchflow job.yaml`).

Exit codes: 0 every trial ran without error (a reward of 0 is not an error), 1 some
trial ended in an error, 2 bad input (job file, datasets, arguments), 130 cancelled.
"""

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import anyio
import typer
from rich.console import Console
from rich.table import Table

from benchflow import bounds as B
from benchflow.cli._common import (
    EXIT_BAD_INPUT,
    EXIT_CANCELLED,
    EXIT_OK,
    EXIT_ROLLOUT_ERROR,
    console,
    err_console,
    set_console_level,
    user_errors,
)
from benchflow.cli.progress import JobProgress, results_table
from benchflow.errors import ConfigError
from benchflow.job.config import MetricConfig, load_job_config, with_absolute_paths, with_overrides
from benchflow.job.job import Job
from benchflow.job.loop import run_job_loop
from benchflow.job.metrics import RunningMetrics
from benchflow.job.models import JobResult, aggregate
from benchflow.job.runner import PreparedJob, make_job, opened_job, prepare_job
from benchflow.job.signals import remove_containers, run_with_signals
from benchflow.job.store import RESULT, iter_trial_results
from benchflow.rollout.events import RolloutEvent, RolloutEventKind, combine
from benchflow.rollout.result import RolloutResult
from benchflow.sandbox.owner import CleanupScope, job_instance_id
from benchflow.sandbox.provider import SandboxProvider
from benchflow.sandbox.registry import check_backend
from benchflow.telemetry import recorder

if TYPE_CHECKING:
    from benchflow.traces.join import JobTraces

ANSWERS_SHOWN = 50
"""A QA job of at most this many rollouts prints each item's answer and reward."""

app = typer.Typer(name="jobs", no_args_is_help=True,
                  help="Run a job file (agents x tasks x attempts), resume it, summarize it.")


class MetricsProgress(JobProgress):
    """JobProgress that also shows the job file's metrics, updated as trials end (O(1)
    per trial: running sums, not a pass over every result)."""

    def __init__(self, console: Console, total: int, title: str,
                 metrics: Sequence[MetricConfig], finished: Sequence[RolloutResult] = ()) -> None:
        self.metrics = list(metrics)
        self.running = RunningMetrics()
        for result in finished:
            self.running.add(result)
        super().__init__(console, total, title)

    def _stats(self) -> str:
        values = self.running.values(self.metrics)
        shown = "  ".join(f"{k} {'-' if v is None else f'{v:.3f}'}" for k, v in values.items())
        return f"{super()._stats()}  {shown}".rstrip()

    def __call__(self, event: RolloutEvent) -> None:
        if event.kind is RolloutEventKind.END and event.result is not None:
            self.running.add(event.result)
        super().__call__(event)


def _notify(message: str) -> None:
    err_console.print(f"[yellow]{message}[/]", highlight=False)


def _job_traces(prepared: PreparedJob, listen: str | None) -> "JobTraces | None":
    """The job's trace listener when it has an http agent (`listen`: see --trace-listen)."""
    from benchflow.agents.http import HttpAgent

    http = {id(d): d for t in prepared.to_run for d in t.drivers.values()
            if isinstance(d, HttpAgent)}
    if not http:
        return None
    from benchflow.traces.join import JobTraces

    traces = JobTraces.start(prepared.job_dir, listen, [d.scrub for d in http.values()])
    if traces is not None:
        err_console.print(f"agent traces: OTLP/HTTP on {traces.url}", highlight=False)
    return traces


async def _execute(prepared: PreparedJob, provider: SandboxProvider, *,
                   resuming: bool, otel: bool = False,
                   trace_listen: str | None = None) -> tuple[JobResult, Job]:
    config = prepared.config
    if resuming:  # sandboxes a crashed run of this job instance left behind
        await remove_containers(CleanupScope(job_id=job_instance_id(prepared.job_dir)), provider)
    title = f"{config.name} ({len(prepared.to_run)} trials)"
    with MetricsProgress(console, len(prepared.to_run), title, config.metrics,
                         prepared.finished) as progress:
        spans = recorder(otel, config.name)  # also on with OTEL_EXPORTER_OTLP_ENDPOINT
        traces = _job_traces(prepared, trace_listen)
        job = make_job(prepared, listener=combine(progress, spans, traces))
        if resuming:
            from benchflow.job.resume import previous_start

            job.started_at = previous_start(prepared.job_dir)
        if spans is not None:
            spans.run_id = job.run_id
        try:
            result = await run_with_signals(job, provider, _notify)
        finally:
            if spans is not None:
                spans.finish()
            if traces is not None:
                traces.stop()
    return result, job


def run_prepared(prepared: PreparedJob, *, resuming: bool, otel: bool = False,
                 trace_listen: str | None = None) -> int:
    """Run a prepared job (new or resumed) with progress, signals and a summary; the exit code.

    The one path `jobs run`, `jobs resume` and `benchflow run` share (`benchflow run` opens
    the job and starts its first sandbox itself, then calls `run_opened` and `report`);
    `otel` exports spans (as `OTEL_EXPORTER_OTLP_ENDPOINT` does); `trace_listen` is where
    jobs with an http agent receive its traces (None: the default address, `none`: nowhere).
    """
    set_console_level(prepared.config.log_level)
    with opened_job(prepared, resuming=resuming) as provider:
        result, job = run_opened(prepared, provider, resuming=resuming, otel=otel,
                                 trace_listen=trace_listen)
    return report(prepared, result, job)


def run_opened(prepared: PreparedJob, provider: SandboxProvider, *, resuming: bool,
               otel: bool = False, trace_listen: str | None = None) -> tuple[JobResult, Job]:
    """Run the trials of a job `opened_job` opened, with progress and Ctrl-C handling."""
    return run_job_loop(lambda: _execute(prepared, provider, resuming=resuming,
                                         otel=otel or prepared.config.otel,
                                         trace_listen=trace_listen),
                        in_flight=min(prepared.config.n_concurrent_trials, len(prepared.to_run)))


def report(prepared: PreparedJob, result: JobResult, job: Job) -> int:
    """Print the job's tables and summary; its exit code."""
    results = job.all_results()
    if any(r.answer is not None for r in results) and len(results) <= ANSWERS_SHOWN:
        console.print(results_table(results))  # QA: each item's answer and reward
    console.print(summary_table(results, title=f"job {result.job_name}"))
    roles = roles_table(results)
    if roles is not None and any(len(r.roles) > 1 for r in results):
        console.print(roles)
    _print_summary(result, prepared.job_dir)
    if result.cancelled:
        return EXIT_CANCELLED
    return EXIT_ROLLOUT_ERROR if any(r.error for r in job.all_results()) else EXIT_OK


def _exit_code(fn: object, *args: object, **kwargs: object) -> int:
    try:
        with user_errors():
            return fn(*args, **kwargs)  # type: ignore[operator]
    except typer.Exit as exc:
        return exc.exit_code


def _run_file(path: Path, n_concurrent: int | None, n_attempts: int | None,
              environment: str | None, jobs_dir: Path | None, executor: str | None = None,
              ray_address: str | None = None, trace_listen: str | None = None) -> int:
    config = load_job_config(path)
    if environment is not None:
        check_backend(environment)
    config = with_overrides(config, n_concurrent_trials=n_concurrent, n_attempts=n_attempts,
                            environment_type=environment, jobs_dir=jobs_dir,
                            executor=executor, ray_address=ray_address)
    prepared = prepare_job(with_absolute_paths(config), source=path)
    if not prepared.trials:
        raise ConfigError(f"{path}: the job has no trials: its datasets hold no tasks")
    return run_prepared(prepared, resuming=False, trace_listen=trace_listen)


def run_job_file(path: Path, *, n_concurrent: int | None = None, n_attempts: int | None = None,
                 environment: str | None = None, jobs_dir: Path | None = None,
                 executor: str | None = None, ray_address: str | None = None,
                 trace_listen: str | None = None) -> int:
    """Run the job file at `path` with optional overrides; returns the exit code.

    Bad input is printed as one line on stderr (exit code 2), never a traceback.
    """
    return _exit_code(_run_file, Path(path), n_concurrent, n_attempts, environment, jobs_dir,
                      executor, ray_address, trace_listen)


@app.command("run")
def run_command(
    job_file: Annotated[Path, typer.Argument(help="job file (YAML or JSON)")],
    n_concurrent: Annotated[int | None, typer.Option(
        "-n", "--concurrency", "--n-concurrent", min=1, max=B.MAX_CONCURRENCY,
        help="override n_concurrent_trials")] = None,
    n_attempts: Annotated[int | None, typer.Option(
        "-k", "--n-attempts", min=1, max=B.MAX_ATTEMPTS, help="override n_attempts")] = None,
    environment: Annotated[str | None, typer.Option(
        "--env", help="override environment.type: a registered sandbox backend (docker, daytona, "
        "modal, or a plugin's)")] = None,
    jobs_dir: Annotated[Path | None, typer.Option("--jobs-dir", help="override jobs_dir")] = None,
    executor: Annotated[str | None, typer.Option(
        "--executor", help="local (this process) or ray (Ray workers; the ray extra)")] = None,
    ray_address: Annotated[str | None, typer.Option(
        "--ray-address", help="with --executor ray: the cluster (auto, host:port)")] = None,
    trace_listen: Annotated[str | None, typer.Option(
        "--trace-listen", help="http agents: where to receive their OTLP/HTTP traces, "
        "HOST:PORT or none (default 127.0.0.1:4318)")] = None,
) -> None:
    """Run every agent of JOB_FILE on every task of its datasets, n_attempts times."""
    raise typer.Exit(run_job_file(job_file, n_concurrent=n_concurrent, n_attempts=n_attempts,
                                  environment=environment, jobs_dir=jobs_dir,
                                  executor=executor, ray_address=ray_address,
                                  trace_listen=trace_listen))


def _resume(job_dir: Path, retry_errors: bool, config_file: Path | None,
            n_concurrent: int | None) -> int:
    from benchflow.job.resume import prepare_resume

    prepared = prepare_resume(job_dir, retry_errors=retry_errors, config_file=config_file,
                              n_concurrent_trials=n_concurrent)
    err_console.print(f"{len(prepared.finished)} trial(s) already finished; running "
                      f"{len(prepared.to_run)}", highlight=False)
    return run_prepared(prepared, resuming=True)


@app.command("resume")
def resume_command(
    job_dir: Annotated[Path, typer.Argument(help="the job folder, jobs/<job>")],
    retry_errors: Annotated[bool, typer.Option(
        "--retry-errors", help="also run again the trials that ended in an error")] = False,
    config_file: Annotated[Path | None, typer.Option(
        "-c", "--config", help="the original job file (when config.json holds redacted secrets)"
    )] = None,
    n_concurrent: Annotated[int | None, typer.Option("-n", "--concurrency", "--n-concurrent", min=1,
                                                     max=B.MAX_CONCURRENCY)] = None,
) -> None:
    """Run the trials of JOB_DIR that have no final result yet; never a finished one again."""
    raise typer.Exit(_exit_code(_resume, job_dir, retry_errors, config_file, n_concurrent))


def summary_table(results: Sequence[RolloutResult], title: str = "job") -> Table:
    """One row per agent and dataset: trials, completed (done), failed, pass rate, mean
    reward, cost. Short headers: the table fits an 80-column terminal."""
    table = Table(title=title)
    for column in ("agent", "dataset", "trials", "done", "failed", "pass", "reward",
                   "cost", "errors"):
        table.add_column(column, justify="left" if column in ("agent", "dataset", "errors")
                         else "right")
    groups: dict[tuple[str, str], list[RolloutResult]] = {}
    for r in results:
        groups.setdefault((r.agent_name, r.dataset_name), []).append(r)
    for (agent, dataset), group in sorted(groups.items()):
        agg = aggregate(group)
        errors: dict[str, int] = {}
        for r in group:
            if r.error is not None:
                errors[r.error.type] = errors.get(r.error.type, 0) + 1
        table.add_row(
            agent, dataset, str(agg.total_trials), str(agg.completed_trials),
            str(agg.failed_trials), "-" if agg.pass_rate is None else f"{agg.pass_rate:.0%}",
            "-" if agg.mean_reward is None else f"{agg.mean_reward:.3f}",
            "-" if agg.total_cost is None else f"{agg.total_cost:.4f}",
            ", ".join(f"{k} x{v}" for k, v in sorted(errors.items())),
        )
    return table


def roles_table(results: Sequence[RolloutResult], title: str = "roles") -> Table | None:
    """One row per agent label and role: its agent and model, tokens (`*`: counted by
    benchflow's model server or relay), tool calls, cost. None when no result names roles."""
    groups: dict[tuple[str, str], list[tuple[RolloutResult, Any]]] = {}
    for r in results:
        for name, role in r.roles.items():
            groups.setdefault((r.agent_name, name), []).append((r, role))
    if not groups:
        return None
    table = Table(title=title)
    for column in ("agent", "role", "role agent", "model", "in tok", "out tok", "tools", "cost"):
        table.add_column(column, justify="left" if column in ("agent", "role", "role agent",
                                                               "model") else "right")
    for (label, name), rows in sorted(groups.items()):
        roles = [role for _, role in rows]
        counted = [role.tokens for role in roles if role.tokens is not None]
        costs = [role.cost for role in roles if role.cost is not None]
        mark = "*" if any(role.usage_source == "model_calls" for role in roles) else ""
        table.add_row(
            label, name, roles[0].agent, roles[0].model or "-",
            f"{sum(t.input for t in counted)}{mark}" if counted else "-",
            f"{sum(t.output for t in counted)}{mark}" if counted else "-",
            str(sum(role.n_tool_calls for role in roles)),
            f"{sum(costs):.4f}" if costs else "-")
    if any(role.usage_source == "model_calls" for rows in groups.values() for _, role in rows):
        table.caption = "* counted by benchflow's model server or relay (no usage over ACP)"
    return table


def _print_summary(result: JobResult, job_dir: Path) -> None:
    rate = "-" if result.pass_rate is None else f"{result.pass_rate:.0%}"
    mean = "-" if result.mean_reward is None else f"{result.mean_reward:.3f}"
    metrics = "  ".join(f"{k} {'-' if v is None else f'{v:.3f}'}"
                        for k, v in result.metrics.items())
    state = "[yellow]cancelled[/] — " if result.cancelled else ""
    err_console.print(
        f"{state}{result.completed_trials}/{result.total_trials} scored, {result.failed_trials} "
        f"failed, {result.skipped_trials} skipped, pass rate {rate}, mean reward {mean}"
        f"{'  ' + metrics if metrics else ''} — results in {job_dir}", highlight=False)


@app.command("summary")
def summary_command(
    job_dir: Annotated[Path, typer.Argument(help="the job folder, jobs/<job>")],
) -> None:
    """Tabulate a job's trial results per agent and dataset (works on unfinished jobs too)."""
    if not job_dir.is_dir():
        err_console.print(f"[bold red]error:[/] {job_dir}: no such job folder", highlight=False)
        raise typer.Exit(EXIT_BAD_INPUT)
    results = list(iter_trial_results(job_dir))
    console.print(summary_table(results, title=f"job {job_dir.name}"))
    roles = roles_table(results)
    if roles is not None:
        console.print(roles)
    try:
        saved = JobResult.model_validate_json((job_dir / RESULT).read_text())
    except (OSError, ValueError):
        err_console.print(f"{len(results)} trial result(s); no job result.json yet",
                          highlight=False)
        return
    _print_summary(saved, job_dir)


@app.command("regrade")
def regrade_command(
    job_dir: Annotated[Path, typer.Argument(help="the job folder, jobs/<job>")],
    task_dir: Annotated[Path | None, typer.Option(
        "--task-dir", help="verify with this task folder's verifier instead (e.g. fixed "
        "tests)")] = None,
) -> None:
    """Verify every rollout's final workspace again (from its snapshot: run the job with
    --snapshot-turns) and write the new rewards beside the old ones, never over them."""
    from benchflow.job.regrade import plan_regrade, regrade

    with user_errors():
        targets, skipped = plan_regrade(job_dir, task_dir)
    for item in skipped:
        err_console.print(f"{item.rollout}: skipped ({item.skipped})", highlight=False)
    failed = False

    async def _all() -> None:
        nonlocal failed
        for target in targets:
            done = await regrade(target, task_dir)
            new = done.new
            assert new is not None
            failed = failed or new.error is not None
            now = new.reward if new.error is None else f"error {new.error.type}"
            console.print(f"{done.rollout}: reward {done.old_reward} -> {now}",
                          highlight=False)

    anyio.run(_all)
    raise typer.Exit(EXIT_ROLLOUT_ERROR if failed else EXIT_OK)


@app.command("rm")
def remove_command(
    job_dir: Annotated[Path, typer.Argument(help="the job folder, jobs/<job>")],
    keep_snapshots: Annotated[bool, typer.Option(
        "--keep-snapshots", help="keep the rollouts' turn snapshots (images)")] = False,
) -> None:
    """Delete a job folder and, unless --keep-snapshots, its rollouts' turn snapshots."""
    import shutil

    from benchflow.rollout.snapshots import remove_snapshots

    with user_errors():
        if not job_dir.is_dir() or not any(job_dir.glob(f"*/*/*/{RESULT}")) and not (
                job_dir / RESULT).is_file():
            raise ConfigError(f"{job_dir}: not a job folder (no result.json in it or its "
                              "rollouts)")
        folders = [p.parent for p in job_dir.glob(f"*/*/*/{RESULT}")]
        removed = [] if keep_snapshots else anyio.run(remove_snapshots, folders)
        shutil.rmtree(job_dir)
    console.print(f"removed {job_dir}" + (f" and {len(removed)} snapshot(s)" if removed
                                          else ""), highlight=False)


__all__ = ["app", "roles_table", "run_job_file", "summary_table"]


if __name__ == "__main__":  # python -m benchflow.cli.jobs run job.yaml
    app()
